package raycluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestTempDir(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "/tmp/ray"},
		{[]string{"--temp-dir=/data/ray"}, "/data/ray"},
		{[]string{"--num-cpus", "4", "--temp-dir", "/data/ray"}, "/data/ray"},
		{[]string{"--temp-dir"}, "/tmp/ray"},
	} {
		if got := tempDir(c.args); got != c.want {
			t.Errorf("tempDir(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// The script moves the directory session_latest names, when it is the
// user's own and under the temp dir, and nothing else.
func TestLeaveSessionScript(t *testing.T) {
	run := func(dir string) {
		t.Helper()
		if out, err := exec.Command("sh", "-c", LeaveSessionScript, "sh", dir).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	dir := t.TempDir()
	s := filepath.Join(dir, "session_2026-12-04_02-23-27_1")
	other := filepath.Join(dir, "session_2026-12-03_01-00-00_1")
	for _, d := range []string{s, other} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	run(dir) // no session_latest: nothing to do
	if err := os.Symlink(s, filepath.Join(dir, "session_latest")); err != nil {
		t.Fatal(err)
	}
	run(dir)
	u, _ := exec.Command("id", "-un").Output()
	if _, err := os.Stat(s + ".left-by-" + string(u[:len(u)-1])); err != nil {
		t.Fatalf("the session was not moved aside: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another session was touched: %v", err)
	}
	// session_latest pointing outside the temp dir: left alone.
	outside := t.TempDir()
	_ = os.Remove(filepath.Join(dir, "session_latest"))
	if err := os.Symlink(outside, filepath.Join(dir, "session_latest")); err != nil {
		t.Fatal(err)
	}
	run(dir)
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("a directory outside the temp dir was moved: %v", err)
	}
}
