package vllm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The run file a supervised unit runs execs the serve argv as given, with
// the env file and the key file read when it starts: arguments with
// quotes, spaces, $ and globs reach the process unchanged. It runs the
// script in a local shell, as the node's does.
func TestRunFileScriptKeepsTheArgv(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte("FOO='from env'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"it's", "a b", "$HOME", `back\slash`, "*", `"q"`, ""}
	argv := append([]string{"sh", "-c", `for a in "$@"; do printf '<%s>\n' "$a"; done; echo "key=$VLLM_API_KEY foo=$FOO"`, "sh"}, args...)
	write := exec.Command("sh", append([]string{"-c", RunFileScript, "sh", keyFile, "spark-vllm-x.service", ""}, argv...)...)
	write.Dir = dir
	if out, err := write.CombinedOutput(); err != nil {
		t.Fatalf("writing run: %v: %s", err, out)
	}
	fi, err := os.Stat(filepath.Join(dir, "run"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("run: %v %v, want mode 0700", fi, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "run"))
	if strings.Contains(string(b), "s3cret") {
		t.Fatalf("the key is in run:\n%s", b)
	}
	run := exec.Command("/bin/sh", filepath.Join(dir, "run"))
	run.Dir, run.Env = dir, []string{"PATH=/nonexistent"} // systemd's environment is not the session's
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v: %s\n%s", err, out, b)
	}
	var want strings.Builder
	for _, a := range args {
		want.WriteString("<" + a + ">\n")
	}
	want.WriteString("key=s3cret foo=from env\n")
	if string(out) != want.String() {
		t.Errorf("run printed\n%s\nwant\n%s\nrun:\n%s", out, want.String(), b)
	}
}

// A command not on the PATH is refused when the run file is written,
// naming vllm_command.
func TestRunFileScriptRefusesAMissingCommand(t *testing.T) {
	cmd := exec.Command("sh", "-c", RunFileScript, "sh", "", "u.service", "", "no-such-vllm-xyz", "serve")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "set vllm_command to its full path") {
		t.Fatalf("got %v: %s", err, out)
	}
}
