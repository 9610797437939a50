package runtime

import (
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
	r := Runtime{Container: &Container{Image: "img:1", Name: "ray-node"}}
	got := r.ProbeArgv([]string{"sh", "-c", "x"})
	if got[len(got)-3] != "sh" || got[4] != "ray-node" || got[5] != "img:1" || !strings.Contains(got[2], "--network host") {
		t.Fatalf("container probe = %q", got)
	}
}
