package ray

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TokenRead and AuthEnv find the token where Ray does, in Ray's order:
// RAY_AUTH_TOKEN, else the file RAY_AUTH_TOKEN_PATH names (set but empty
// or missing is no token), else ~/.ray/auth_token. Run by this machine's
// sh with a home and variables of the test's own.
func TestTokenFoundAsRayFindsIt(t *testing.T) {
	home := t.TempDir()
	other := filepath.Join(t.TempDir(), "token")
	if err := os.MkdirAll(filepath.Join(home, ".ray"), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".ray", "auth_token"), "from-file\n")
	write(other, "from-path\n")
	empty := filepath.Join(t.TempDir(), "empty")
	write(empty, "")
	run := func(script string, env ...string) string {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return strings.TrimSpace(string(out))
	}
	mode := AuthEnv + `; echo "${RAY_AUTH_MODE:-off}"`
	for _, c := range []struct {
		name      string
		env       []string
		token     string
		tokenMode string
	}{
		{"the default file", nil, "from-file", "token"},
		{"RAY_AUTH_TOKEN wins over both files", []string{"RAY_AUTH_TOKEN=from-env", "RAY_AUTH_TOKEN_PATH=" + other}, "from-env", "token"},
		{"RAY_AUTH_TOKEN_PATH wins over the default file", []string{"RAY_AUTH_TOKEN_PATH=" + other}, "from-path", "token"},
		{"RAY_AUTH_TOKEN_PATH set to an empty file: no token (Ray refuses it)", []string{"RAY_AUTH_TOKEN_PATH=" + empty}, "", "off"},
		{"RAY_AUTH_TOKEN_PATH set to no file: no token", []string{"RAY_AUTH_TOKEN_PATH=/nonexistent/token"}, "", "off"},
	} {
		if got := run(TokenRead, c.env...); got != c.token {
			t.Errorf("%s: TokenRead = %q, want %q", c.name, got, c.token)
		}
		if got := run(mode, c.env...); got != c.tokenMode {
			t.Errorf("%s: AuthEnv sets RAY_AUTH_MODE=%s, want %s", c.name, got, c.tokenMode)
		}
	}
	if err := os.Remove(filepath.Join(home, ".ray", "auth_token")); err != nil {
		t.Fatal(err)
	}
	if got := run(TokenRead); got != "" {
		t.Errorf("no token anywhere: TokenRead = %q", got)
	}
	if got := run(mode); got != "off" {
		t.Errorf("no token anywhere: RAY_AUTH_MODE=%s", got)
	}
}
