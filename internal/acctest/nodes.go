package acctest

import (
	"context"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/lab"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// A Look is one thing Running looks for on a lab node: a shell command that
// prints one line per match, and nothing when there is none.
type Look string

const (
	// RayDaemons is every user's raylet and gcs_server, matched by their
	// exact process name: "<pid> <command line>" each, raylets first. No
	// Ray daemon left means no Ray of any kind on the node.
	RayDaemons Look = "pgrep -a -x raylet; pgrep -a -x gcs_server"
	// RayletUser is each raylet as "<pid> <user>": a new pid is a
	// restarted raylet, the user is the SSH user Ray runs as there.
	RayletUser Look = "ps -o pid=,user= -C raylet"
	// VLLMServe is every vllm serve, matched by its command line ("[v]"
	// keeps the shell that runs pgrep out): "<pid> <command line>" each.
	VLLMServe Look = "pgrep -af '[v]llm serve'"
	// VLLMEngine is vLLM's engine processes (VLLM::EngineCore and the
	// like), which can outlive the vllm serve that started them.
	VLLMEngine Look = "pgrep -af '[V]LLM::'"
	// VLLMPort is a socket listening on 8000, the lab deployments' port:
	// whatever still holds it, a new server cannot serve there.
	VLLMPort Look = "ss -Hltn 'sport = :8000'"
	// RayStart is a `ray start` still running: it starts the daemons and
	// exits, so one left over is a start that never finished.
	RayStart Look = "pgrep -af '(^|/)ray start( |$)'"
	// Listeners: every TCP socket listening on the node, sorted (a copy's
	// receiver listens on a port of its own, like any server).
	Listeners Look = "ss -Hltn | sort"
)

// RayDaemonsOf is RayDaemons of one user only: another user's Ray on the
// same node (a second team) is not this user's.
func RayDaemonsOf(user string) Look {
	return Look("pgrep -a -u " + user + " -x raylet; pgrep -a -u " + user + " -x gcs_server")
}

// Running lists what the looks find on a lab node, in their order, looked
// up inside the node itself as root (every user's processes show), not
// through Ray or the provider, which may be what failed. "" when nothing
// matches; an error only when the node cannot be looked at. For checks
// that return their error (Check, CheckDestroy).
func Running(n lab.Node, looks ...Look) (string, error) {
	return RunningAs(n, "", looks...)
}

// RunningAs is Running as user ("" is root), with that user's home: for
// looks that name the user's own files ($(id -u), $HOME).
func RunningAs(n lab.Node, user string, looks ...Look) (string, error) {
	out, err := execAs(n, user, "sh", "-c", lookScript(looks))
	return strings.TrimSpace(out), err
}

// lookScript runs each command of the looks in turn. A command that finds
// nothing exits 1 (pgrep, ps -C), which is an answer; one that cannot look
// (a bad pattern: pgrep exits 2; a missing tool: 127) fails the script,
// naming itself, or a broken look would read as "nothing running".
func lookScript(looks []Look) string {
	var script []string
	for _, l := range looks {
		for _, c := range strings.Split(string(l), "; ") {
			script = append(script, c+" || [ $? -eq 1 ] || { echo "+transport.Quote("cannot look: "+c)+" >&2; exit 3; }")
		}
	}
	return strings.Join(append(script, "exit 0"), "\n")
}

// RunningOrFail is Running for a step's PreConfig: a node that cannot be
// looked at fails the test, naming the node and the error (which names
// the command and carries its stderr).
func RunningOrFail(t *testing.T, n lab.Node, looks ...Look) string {
	t.Helper()
	out, err := Running(n, looks...)
	if err != nil {
		t.Fatalf("cannot look at what runs on %s: %v", n.Name, err)
	}
	return out
}

// Snapshot is RunningOrFail on every lab node, each node's listing under
// its name: taken before and after a step, two equal snapshots say the
// step started and stopped nothing the looks can see.
func Snapshot(t *testing.T, l *lab.File, looks ...Look) string {
	t.Helper()
	var b strings.Builder
	for _, n := range l.Nodes {
		b.WriteString(n.Name + ":\n" + RunningOrFail(t, n, looks...) + "\n")
	}
	return b.String()
}

// PIDs keeps the first field, the pid, of each line of a listing of
// processes, space-separated: what tells the same processes from new ones.
func PIDs(listing string) string {
	var pids []string
	for _, line := range strings.Split(listing, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			pids = append(pids, f[0])
		}
	}
	return strings.Join(pids, " ")
}

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
	out, err := execAs(n, user, argv...)
	if err != nil {
		t.Fatalf("%s on %s: %v", what, n.Name, err)
	}
	return strings.TrimSpace(out)
}

// execAs runs argv on a lab node as user, with that user's home; "" is
// root, with the container's own environment.
func execAs(n lab.Node, user string, argv ...string) (string, error) {
	if user == "" {
		return lab.Exec(context.Background(), n, argv...)
	}
	return lab.ExecAs(context.Background(), n, user, argv...)
}
