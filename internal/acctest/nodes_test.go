package acctest

import (
	"os/exec"
	"strings"
	"testing"
)

// A look that finds nothing is an answer; a look that cannot look is an
// error, not "nothing running". Run here, with this machine's tools.
func TestLookScriptFailsWhenALookCannotLook(t *testing.T) {
	for _, c := range []struct {
		looks []Look
		fails bool
	}{
		{[]Look{"pgrep -x no-such-process-here", "ps -o pid= -C no-such-process-here"}, false},
		{[]Look{"echo 1 found"}, false},
		{[]Look{"pgrep -x no-such-process-here; pgrep --no-such-option x"}, true}, // exit 2
		{[]Look{"no-such-tool-here -x"}, true},                                    // exit 127
	} {
		out, err := exec.Command("sh", "-c", lookScript(c.looks)).CombinedOutput()
		if failed := err != nil; failed != c.fails {
			t.Errorf("looks %q: failed = %v (%s), want %v", c.looks, failed, out, c.fails)
		}
		if c.fails && !strings.Contains(string(out), "cannot look:") {
			t.Errorf("looks %q: the error does not name the look: %s", c.looks, out)
		}
	}
}
