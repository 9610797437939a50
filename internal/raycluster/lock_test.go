package raycluster

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// startLock runs lockScript on this machine as a node would, with TMPDIR
// pointing at dir, and waits until it holds the lock (or failed). The
// returned function releases it (closes its stdin).
func startLock(t *testing.T, dir, holder string) (func(), string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", LockScript, "sh", holder)
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	release := func() {
		stdin.Close()
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	}
	if strings.TrimSpace(line) != "locked" {
		release()
		return func() {}, stderr.String()
	}
	return release, ""
}

// The second operation is refused naming the process that really holds
// the lock and its user, read from the kernel, with that user's note.
func TestLockScriptNamesTheRealHolder(t *testing.T) {
	for _, tool := range []string{"flock", "awk", "stat"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on this machine", tool)
		}
	}
	dir := t.TempDir()
	release, msg := startLock(t, dir, "apply A (test)")
	if msg != "" {
		t.Fatalf("first lock: %s", msg)
	}
	// A note under another uid's name, not owned by it, is not believed.
	if err := os.WriteFile(filepath.Join(dir, "terraform-provider-spark.lock.holder.65534"), []byte("pid 1 1\nforged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, msg = startLock(t, dir, "apply B (test)")
	if strings.Contains(msg, "forged") {
		t.Errorf("a note the kernel does not confirm was shown: %q", msg)
	}
	me, _ := user.Current()
	for _, want := range []string{"holds the lock on this node", "process ", "of user " + me.Username, "which says: apply A (test)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	release()
	if _, err := os.Stat(filepath.Join(dir, "terraform-provider-spark.lock.holder."+me.Uid)); !os.IsNotExist(err) {
		t.Errorf("the holder note outlives the lock: %v", err)
	}
	// Released: the next one takes it.
	release, msg = startLock(t, dir, "apply B (test)")
	if msg != "" {
		t.Fatalf("after release: %s", msg)
	}
	release()
}

// A lock file another user created (0644, in a sticky world-writable
// directory such as /tmp) is still usable: flock on a read descriptor. The
// earlier script opened it for append and got "Permission denied".
func TestLockScriptUsesAnotherUsersLockFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the lock file to another user")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "terraform-provider-spark.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(lock, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// A note planted under this user's name by someone else is not trusted.
	release, msg := startLock(t, dir, "apply A (test)")
	if msg != "" {
		t.Fatalf("lock file of another user: %s", msg)
	}
	release()
}

// Each node is locked once, and two boxes behind one address (two SSH
// ports) are two nodes; the order is fixed, whatever the order asked.
func TestLockOrder(t *testing.T) {
	got := lockOrder([]transport.Endpoint{
		{Host: "10.0.0.2", Port: 2222}, {Host: "10.0.0.1"}, {Host: "10.0.0.2", Port: 22},
		{Host: "10.0.0.1", Port: 22}, {Host: "10.0.0.2", Port: 2222, User: "ops2"},
	})
	want := []transport.Endpoint{{Host: "10.0.0.1"}, {Host: "10.0.0.2", Port: 22}, {Host: "10.0.0.2", Port: 2222}}
	if len(got) != len(want) {
		t.Fatalf("lock order %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Host != want[i].Host || got[i].Port != want[i].Port {
			t.Fatalf("lock order %v, want %v", got, want)
		}
	}
}

// Links planted in the lock's place are never written through (issue 33:
// a co-tenant's holder.<uid> -> the victim's ~/.ssh/authorized_keys was
// overwritten by the victim's next apply): the note is not written, the
// victim's file keeps its bytes, a link to nothing creates nothing, and a
// lock that is not a regular file (a FIFO would hang every apply) is
// refused naming it.
func TestLockScriptNeverFollowsAPlantedLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "authorized_keys")
	if err := os.WriteFile(victim, []byte("ssh-ed25519 AAAA victim\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	me, _ := user.Current()
	if err := os.Symlink(victim, filepath.Join(dir, "terraform-provider-spark.lock.holder."+me.Uid)); err != nil {
		t.Fatal(err)
	}
	nowhere := filepath.Join(t.TempDir(), "created-through-a-link")
	if err := os.Symlink(nowhere, filepath.Join(dir, "terraform-provider-spark.lock")); err != nil {
		t.Fatal(err)
	}
	_, msg := startLock(t, dir, "apply A (test)")
	if !strings.Contains(msg, "is not a regular file") {
		t.Errorf("a lock that is a link: %q", msg)
	}
	if _, err := os.Lstat(nowhere); !os.IsNotExist(err) {
		t.Errorf("the lock was created through a link: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "terraform-provider-spark.lock")); err != nil {
		t.Fatal(err)
	}
	release, msg := startLock(t, dir, "apply A (test)")
	if msg != "" {
		t.Fatalf("lock: %s", msg)
	}
	release()
	if b, _ := os.ReadFile(victim); string(b) != "ssh-ed25519 AAAA victim\n" {
		t.Fatalf("the note was written through the link: %q", b)
	}
	fifo := filepath.Join(t.TempDir(), "terraform-provider-spark.lock")
	if err := exec.Command("mkfifo", fifo).Run(); err != nil {
		t.Fatal(err)
	}
	if _, msg := startLock(t, filepath.Dir(fifo), "apply A (test)"); !strings.Contains(msg, "is not a regular file") {
		t.Errorf("a FIFO lock: %q", msg)
	}
}
