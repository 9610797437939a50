package nodeexec

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostRuntimeLeavesArgvAlone(t *testing.T) {
	r := Runtime{RayCommand: "/opt/ray/bin/ray"}
	got := r.Wrap([]string{"ray", "status"}, false)
	if strings.Join(got, " ") != "ray status" || r.EnsureArgv() != nil || strings.Join(r.StopArgv([]string{"stop"}), " ") != "stop" {
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

// fakeDocker is a docker that answers inspect with $STATE ("<running>
// <label>", or absent) until something removed the container, and logs
// every other command it is given.
func fakeDocker(t *testing.T) (bin, log string) {
	t.Helper()
	bin = t.TempDir()
	fake := `#!/bin/sh
if [ "$1" = inspect ]; then
  [ "$STATE" = absent ] || [ -e "$0.removed" ] && exit 1
  echo "$STATE"; exit 0
fi
[ "$1" = rm ] && touch "$0.removed"
echo "$*" >> "$0.log"
`
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, filepath.Join(bin, "docker.log")
}

func runFake(t *testing.T, argv []string, state string) (docker string, err error) {
	t.Helper()
	bin, log := fakeDocker(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STATE="+state)
	out, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(log)
	if err != nil {
		err = fmt.Errorf("%w: %s", err, out)
	}
	return strings.TrimSpace(string(b)), err
}

// dockerCase: with the container in state (as runFake takes it), argv runs
// docker with these arguments ("" nothing).
type dockerCase struct{ state, docker string }

func expectDocker(t *testing.T, argv []string, cases []dockerCase) {
	t.Helper()
	for _, c := range cases {
		got, err := runFake(t, argv, c.state)
		if err != nil || got != c.docker {
			t.Errorf("container %q: docker ran %q (%v), want %q", c.state, got, err, c.docker)
		}
	}
}

// Only this cluster's container (the provider's label, this cluster as its
// owner) is removed, after this cluster's stop ran in it (Ray's daemons
// then leave the GCS's table at once); in someone else's container of the
// same name, or another cluster's, only this cluster's stop runs.
func TestContainerStopRemovesOnlyItsOwnContainer(t *testing.T) {
	r := Runtime{Container: &Container{Image: "img:1", Name: "ray-node-6379", Owner: OwnerOf(6379)}}
	argv := r.StopArgv([]string{"sh", "-c", "stop this cluster"})
	expectDocker(t, argv, []dockerCase{
		{"true gcs-6379", "exec ray-node-6379 sh -c stop this cluster\nrm -f ray-node-6379"},
		{"false gcs-6379", "rm -f ray-node-6379"},
		{"true gcs-6380", "exec ray-node-6379 sh -c stop this cluster"},
		{"false gcs-6380", ""},
		{"true 1", "exec ray-node-6379 sh -c stop this cluster"}, // an earlier release's: whose, it cannot tell
		{"true <no value>", "exec ray-node-6379 sh -c stop this cluster"},
		{"false <no value>", ""},
		{"absent", ""},
	})
}

// This cluster's running container is reused, a stopped one restarted, a
// missing one created with this cluster as its owner; one of that name it
// did not create, or another cluster's, is refused, naming the fix.
func TestEnsureRefusesAContainerItDidNotCreate(t *testing.T) {
	r := Runtime{Container: &Container{Image: "img:1", Name: "ray-node-6379", Owner: OwnerOf(6379)}}
	argv := r.EnsureArgv()
	expectDocker(t, argv, []dockerCase{
		{"true gcs-6379", ""},
		{"false gcs-6379", "start ray-node-6379"},
		{"absent", "run -d --name ray-node-6379 --network host --ipc host --label terraform-provider-spark=gcs-6379 img:1 sleep infinity"},
	})
	for state, want := range map[string]string{
		"true <no value>": "was not created by terraform-provider-spark",
		"false ":          "was not created by terraform-provider-spark",
		"true gcs-6380":   "belongs to another cluster of terraform-provider-spark on this node (label terraform-provider-spark=gcs-6380, this cluster is gcs-6379)",
		"false 1":         "belongs to another cluster",
	} {
		got, err := runFake(t, argv, state)
		if err == nil || got != "" || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "runtime.container.name") {
			t.Errorf("container %q: docker ran %q, err %v", state, got, err)
		}
	}
}

// A read in a container that is not running (absent, or exited after the
// node rebooted) prints its stand-in and succeeds; in a running one it
// runs there. On the host runtime the read runs as it is.
func TestWrapIfRunning(t *testing.T) {
	r := Runtime{Container: &Container{Image: "img:1", Name: "ray-node", Owner: "gcs-6379"}}
	argv := r.WrapIfRunning([]string{"sh", "-c", "read table"}, `@@nodes {"gone": true}`)
	for state, want := range map[string]struct{ stdout, docker string }{
		"true":   {"", "exec ray-node sh -c read table"},
		"false":  {`@@nodes {"gone": true}`, ""},
		"absent": {`@@nodes {"gone": true}`, ""},
	} {
		bin, log := fakeDocker(t)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STATE="+state)
		out, err := cmd.Output()
		b, _ := os.ReadFile(log)
		if err != nil || strings.TrimSpace(string(out)) != want.stdout || strings.TrimSpace(string(b)) != want.docker {
			t.Errorf("container %s: printed %q, docker ran %q (%v); want %q and %q", state, out, b, err, want.stdout, want.docker)
		}
	}
	if got := (Runtime{}).WrapIfRunning([]string{"true"}, "x"); len(got) != 1 || got[0] != "true" {
		t.Errorf("host runtime: %q", got)
	}
}
