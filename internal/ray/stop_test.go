package ray

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeProc starts sh -c script with args in a session of its own (as
// `setsid ray start` puts Ray's daemons) and kills that session at the end.
func fakeProc(t *testing.T, env []string, script string, args ...string) int {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	return pid
}

// alive: the process exists and is not a zombie (a zombie's command line is empty).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && len(b) > 0
}

// pidOf finds the live process whose command line is exactly cmdline.
func pidOf(t *testing.T, cmdline string) int {
	t.Helper()
	for range 50 {
		out, _ := exec.Command("pgrep", "-x", "-f", cmdline).Output()
		for _, f := range strings.Fields(string(out)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil && alive(pid) {
				return pid
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no process %q", cmdline)
	return 0
}

// stop runs the stop script on this machine. Port 46379, not Ray's 6379:
// this machine sees the processes of containers on it too (a lab's
// nodes), and a head stop takes the GCS server by its port.
func stop(t *testing.T, gcsAddr string, head bool) {
	t.Helper()
	argv := StopArgv(gcsAddr, 46379, head)
	argv[len(argv)-1] = "1" // grace period: 1 s
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("stop %s: %v\n%s", gcsAddr, err, out)
	}
}

// The stop takes this cluster's processes on the node, the ones Ray
// spawned in their sessions, and nothing else: not another cluster's Ray
// (another head behind the same port), not the head's GCS server when
// stopping a worker, not the shell a Ray was started from by hand.
func TestStopScriptStopsOnlyThisCluster(t *testing.T) {
	mine, other := "10.77.0.1:46379", "10.77.0.2:46379"
	tag := os.Getpid()
	sleeper := func(n int) string { return fmt.Sprintf("sleep %d.%d", 300+n, tag) }

	// This cluster's raylet with a worker that names no address.
	raylet := fakeProc(t, nil, sleeper(1)+" & wait", "raylet", "--gcs-address="+mine)
	worker := pidOf(t, sleeper(1))
	// Another cluster's raylet, same GCS port, another head.
	otherRaylet := fakeProc(t, nil, sleeper(2)+" & wait", "raylet", "--gcs-address="+other)
	// The head's GCS server, which ignores SIGTERM (the SIGKILL path).
	gcs := fakeProc(t, nil, `trap "" TERM; `+sleeper(3)+" & wait", "gcs_server", "--gcs_server_port=46379")
	// An unfinished worker ray start, as the provider runs it.
	starting := fakeProc(t, nil, sleeper(4)+" & wait", "ray", "start", "--address", mine, "--disable-usage-stats")
	// A login shell that started a raylet without setsid: the shell and
	// its other jobs stay.
	shell := fakeProc(t, []string{"GCS=--gcs-address=" + mine}, `sh -c "`+sleeper(5)+` & wait" raylet "$GCS" & `+sleeper(6)+` & wait`)
	handRaylet := pidOf(t, "sh -c "+sleeper(5)+" & wait raylet --gcs-address="+mine)
	job := pidOf(t, sleeper(6))

	stop(t, mine, false)
	time.Sleep(100 * time.Millisecond)
	for name, pid := range map[string]int{"raylet": raylet, "worker process": worker, "unfinished ray start": starting, "hand-started raylet": handRaylet} {
		if alive(pid) {
			t.Errorf("worker stop left this cluster's %s (pid %d) running", name, pid)
		}
	}
	for name, pid := range map[string]int{"other cluster's raylet": otherRaylet, "GCS server (head only)": gcs, "login shell": shell, "shell's job": job} {
		if !alive(pid) {
			t.Errorf("worker stop killed the %s (pid %d)", name, pid)
		}
	}

	stop(t, mine, true)
	time.Sleep(100 * time.Millisecond)
	if alive(gcs) {
		t.Errorf("head stop left the GCS server (pid %d), which ignores SIGTERM", gcs)
	}
	if !alive(otherRaylet) || !alive(shell) {
		t.Error("head stop killed what is not this cluster's")
	}
}

// Nothing of the cluster on the node: the stop succeeds.
// Nothing of the cluster on the node: the stop succeeds and takes nothing,
// not even what merely looks like it: an address that only begins like
// this cluster's, a head's GCS on another port, and a Ray started by hand
// on another cluster's head.
func TestStopScriptNothingToStop(t *testing.T) {
	tag := os.Getpid()
	near := []struct {
		name string
		argv []string
		pid  int
	}{
		{name: "raylet of 10.77.0.9:463790", argv: []string{"raylet", "--gcs-address=10.77.0.9:463790"}},
		{name: "GCS on port 46380", argv: []string{"gcs_server", "--gcs_server_port=46380"}},
		{name: "ray start of 10.77.0.19", argv: []string{"ray", "start", "--address", "10.77.0.19:46379"}},
	}
	for i := range near {
		sleeper := fmt.Sprintf("sleep %d.%d", 311+i, tag)
		near[i].pid = fakeProc(t, nil, sleeper+" & wait", near[i].argv...)
		pidOf(t, sleeper) // started: the stop below could not have missed it
	}
	stop(t, "10.77.0.9:46379", true)
	time.Sleep(100 * time.Millisecond)
	for _, n := range near {
		if !alive(n.pid) {
			t.Errorf("a stop with nothing of its cluster on the node killed the %s (pid %d)", n.name, n.pid)
		}
	}
}

// A co-tenant's process that names this cluster's GCS address (a decoy) is
// not this SSH user's: the stop neither fails on it nor, run as root,
// kills it (issue 33). The decoy runs as nobody; only root can start it so.
func TestStopScriptLeavesAnotherUsersDecoy(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root: this test starts a process as another user")
		}
		t.Skip("starting a process as another user needs root")
	}
	mine := "10.77.0.1:46379"
	tag := os.Getpid()
	cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("sleep 320.%d & wait", tag), "raylet", "--gcs-address="+mine)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	decoy := cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-decoy, syscall.SIGKILL) })
	raylet := fakeProc(t, nil, fmt.Sprintf("sleep 321.%d & wait", tag), "raylet", "--gcs-address="+mine)
	stop(t, mine, true)
	time.Sleep(100 * time.Millisecond)
	if !alive(decoy) {
		t.Error("the stop killed another user's process")
	}
	if alive(raylet) {
		t.Error("the stop left this user's raylet")
	}
}
