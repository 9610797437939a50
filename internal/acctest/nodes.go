package acctest

import (
	"context"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

// OnNode runs a shell script as root on a lab node, to set up or break
// something there, and returns its output; the test fails when the script
// does, naming what it did, the node and the error (which names the
// command and carries its stderr). args are the script's $1, $2, ...
func OnNode(t *testing.T, n lab.Node, what, script string, args ...string) string {
	t.Helper()
	return OnNodeAs(t, n, "", what, script, args...)
}

// OnNodeAs is OnNode as user, with that user's home ("" is root): what the
// provider's SSH user does there, with its own files and processes.
func OnNodeAs(t *testing.T, n lab.Node, user, what, script string, args ...string) string {
	t.Helper()
	argv := []string{"sh", "-c", script}
	if len(args) > 0 {
		argv = append(append(argv, "sh"), args...)
	}
	var out string
	var err error
	if user == "" {
		out, err = lab.Exec(context.Background(), n, argv...)
	} else {
		out, err = lab.ExecAs(context.Background(), n, user, argv...)
	}
	if err != nil {
		t.Fatalf("%s on %s: %v", what, n.Name, err)
	}
	return strings.TrimSpace(out)
}
