package raycluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tokenRun runs tokenScript with HOME=home, the token on stdin.
func tokenRun(t *testing.T, home, mode, token string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", tokenScript, "sh", mode)
	cmd.Env = append(os.Environ(), "HOME="+home)
	cmd.Stdin = strings.NewReader(token)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

func TestTokenScriptNeverReplacesTheUsersOwnToken(t *testing.T) {
	read := func(home string) (string, bool) {
		b, _ := os.ReadFile(filepath.Join(home, ".ray", "auth_token"))
		_, err := os.Stat(filepath.Join(home, ".ray", "auth_token.terraform-provider-spark"))
		return string(b), err == nil
	}
	own := func(t *testing.T, token string) string {
		home := t.TempDir()
		if err := os.MkdirAll(filepath.Join(home, ".ray"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".ray", "auth_token"), []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		return home
	}
	// Nothing there: written, and marked as the provider's.
	home := t.TempDir()
	if _, code := tokenRun(t, home, "replace", "cluster"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if tok, mine := read(home); tok != "cluster" || !mine {
		t.Fatalf("token %q, marked %v", tok, mine)
	}
	// The provider's own: replaced.
	if _, code := tokenRun(t, home, "replace", "next"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if tok, _ := read(home); tok != "next" {
		t.Fatalf("the provider's token was not replaced: %q", tok)
	}
	// The user's own, another token: refused, left as it was, unmarked.
	home = own(t, "tok-users-1")
	out, code := tokenRun(t, home, "replace", "tok-cluster-2")
	if code != 3 || !strings.Contains(out, "own Ray auth token") || strings.Contains(out, "tok-") {
		t.Fatalf("exit %d (want 3, the reason, no token): %s", code, out)
	}
	if tok, mine := read(home); tok != "tok-users-1" || mine {
		t.Fatalf("the user's token was touched: %q, marked %v", tok, mine)
	}
	// The user's own, the same token: kept, unmarked (a destroy leaves it).
	home = own(t, "cluster")
	if _, code := tokenRun(t, home, "replace", "cluster"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if tok, mine := read(home); tok != "cluster" || mine {
		t.Fatalf("token %q, marked %v", tok, mine)
	}
	// keep on the head: the user's own is the cluster's.
	home = own(t, "users")
	if _, code := tokenRun(t, home, "keep", "fresh"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if tok, mine := read(home); tok != "users" || mine {
		t.Fatalf("token %q, marked %v", tok, mine)
	}
}
