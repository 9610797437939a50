package runtime

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostRuntimeLeavesArgvAlone(t *testing.T) {
	r := Runtime{RayCommand: "/opt/ray/bin/ray"}
	got := r.Wrap([]string{"ray", "status"}, false)
	if strings.Join(got, " ") != "ray status" || r.EnsureArgv() != nil || r.RemoveArgv() != nil {
		t.Fatalf("host runtime changed argv: %v", got)
	}
	if (Runtime{}).Ray() != "ray" {
		t.Fatal("default ray command")
	}
}

func TestContainerRuntimeWrapsInDockerExec(t *testing.T) {
	r := Runtime{Container: &Container{Image: "vllm-node:latest", Name: "ray-node", ShmSize: "10g", GPUs: "all", RunArgs: []string{"-v", "/models:/models"}}}
	if got := strings.Join(r.Wrap([]string{"ray", "status"}, true), " "); got != "docker exec -i ray-node ray status" {
		t.Fatalf("wrap = %q", got)
	}
	ensure := strings.Join(r.EnsureArgv(), " ")
	for _, want := range []string{"--network host", "--shm-size 10g", "--gpus all", "-v /models:/models vllm-node:latest sleep infinity"} {
		if !strings.Contains(ensure, want) {
			t.Errorf("docker run lacks %q: %s", want, ensure)
		}
	}
}

func TestContainerValidate(t *testing.T) {
	if err := (Container{Image: "x", Name: "bad name"}).Validate(); err == nil || !strings.Contains(err.Error(), "bad name") {
		t.Fatalf("bad name accepted: %v", err)
	}
	if err := (Container{Name: "ok"}).Validate(); err == nil || !strings.Contains(err.Error(), "image") {
		t.Fatalf("empty image accepted: %v", err)
	}
}

func TestProbeArgv(t *testing.T) {
	if got := (Runtime{}).ProbeArgv([]string{"sh", "-c", "x"}); strings.Join(got, " ") != "sh -c x" {
		t.Fatalf("host probe = %v", got)
	}
	// Run the probe for real against a docker that prints its argv: with no
	// container running, a throwaway one gets the run_args (the mounts) too.
	bin := t.TempDir()
	fake := "#!/bin/sh\nif [ \"$1\" = inspect ]; then echo ${RUNNING:-false}; exit 0; fi\nprintf '%s\\n' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	r := Runtime{Container: &Container{Image: "img:1", Name: "ray-node", RunArgs: []string{"-v", "/opt/ray:/opt/ray:ro", "-e", "A=b c"}}}
	argv := r.ProbeArgv([]string{"sh", "-c", "echo 'x y'", "arg two"})
	run := func(running string) string {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "RUNNING="+running)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	want := strings.Join([]string{"run", "--rm", "--network", "host", "-v", "/opt/ray:/opt/ray:ro", "-e", "A=b c",
		"--entrypoint", "sh", "img:1", "-c", "echo 'x y'", "arg two"}, "\n")
	if got := run("false"); got != want {
		t.Fatalf("throwaway probe ran docker with\n%s\nwant\n%s", got, want)
	}
	want = strings.Join([]string{"exec", "ray-node", "sh", "-c", "echo 'x y'", "arg two"}, "\n")
	if got := run("true"); got != want {
		t.Fatalf("probe in the running container ran docker with\n%s\nwant\n%s", got, want)
	}
}
