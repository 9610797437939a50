package sim

import (
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/raygcs"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
)

// call is one command the provider sent, read back into its parts: the
// script of `sh -c script sh $1 $2 …` and its positional parameters, and
// whether it came wrapped in `setsid -w` (ray start).
type call struct {
	argv   []string
	script string
	args   []string
	setsid bool
}

func parseCall(argv []string) call {
	c := call{argv: argv}
	if len(argv) >= 2 && argv[0] == "setsid" && argv[1] == "-w" {
		c.setsid, argv = true, argv[2:]
	}
	if len(argv) >= 3 && argv[0] == "sh" && argv[1] == "-c" {
		c.script = argv[2]
		if len(argv) > 4 {
			c.args = argv[4:]
		}
	}
	return c
}

func (c call) has(marker string) bool { return strings.Contains(c.script, marker) }

// stdio is a command's standard streams on its SSH session.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// route is one command the simulated node knows: how to recognise it (the
// provider's own script text where the package exports it, else a marker
// only that script has) and how it answers.
type route struct {
	name  string
	match func(c call) bool
	run   func(m *Model, node int, c call, s stdio) uint32
}

// routes are every command a cluster's plan, create and destroy send on
// the host runtime. Order matters only where markers overlap.
var routes = []route{
	{"read node facts", func(c call) bool { return c.script == nodefacts.Script }, runFacts},
	{"read Ray node table", func(c call) bool { return len(c.args) >= 3 && c.args[1] == ray.NodesScript }, runTable},
	{"lock node", func(c call) bool { return c.script == raycluster.LockScript }, runLock},
	{"write the start marker", func(c call) bool { return c.has("ray-$1.starting") && c.has("printf") }, runMarkWrite},
	{"read the start marker", func(c call) bool { return c.has("ray-$1.starting") && c.has("cat --") }, runMarkRead},
	{"remove the start marker", func(c call) bool { return c.has("ray-$1.starting") && c.has("rm -f") }, runMarkRemove},
	{"ray start", func(c call) bool { return c.setsid && c.has(". /dev/stdin") && arg(c.args, 2) == "start" }, runStart},
	{"stop Ray", func(c call) bool { return c.script == ray.StopScript }, runStop},
	{"write Ray auth token", func(c call) bool { return c.has(".ray/auth_token") && c.has(`"$1" = keep`) }, runTokenWrite},
	{"read Ray auth token", func(c call) bool { return c.script == ray.TokenRead }, runTokenRead},
	{"remove Ray auth token", func(c call) bool { return c.script == raycluster.RemoveTokenScript }, runTokenRemove},
	{"read hostname", func(c call) bool { return slices.Equal(c.argv, []string{"cat", "/proc/sys/kernel/hostname"}) }, runHostname},
	{"name placement groups' drivers", func(c call) bool { return c.script == raygcs.ParentsScript }, runParents},
	{"read the running Ray cluster", func(c call) bool { return c.has("/ray/ray_current_cluster") }, runCurrentCluster},
	// A deployment's: vllm serve and its files, on the head.
	{"check vLLM directory", func(c call) bool { return c.script == vllm.DirScript }, runVLLMDir},
	{"hold the vLLM launch lock", func(c call) bool { return c.script == vllm.LaunchLockScript }, runLaunchLock},
	{"upload a file", func(c call) bool { return c.script == uploadScript }, runUpload},
	{"launch vllm serve", func(c call) bool { return c.script == vllm.LaunchScript }, runLaunch},
	{"check vLLM process", func(c call) bool { return c.script == vllm.StatusScript }, runVLLMStatus},
	{"check vLLM process and port", func(c call) bool { return c.script == vllm.StatusFindScript }, runVLLMStatusFind},
	{"stop vLLM", func(c call) bool { return c.script == vllm.StopScript }, runVLLMStop},
	{"read the vLLM start marker", func(c call) bool { return c.script == vllm.UnfinishedScript }, runUnfinished},
	{"remove the vLLM start marker", func(c call) bool { return c.script == vllm.SettledScript }, runSettled},
	{"find vLLM", func(c call) bool { return c.script == vllm.FindScript }, runFind},
	{"read vLLM log", func(c call) bool { return c.script == vllm.LogTailScript }, runLogTail},
	{"read a file", func(c call) bool { return len(c.argv) == 2 && c.argv[0] == "cat" }, runCat},
}

// uploadScript is transport's: what Upload runs to write a file.
var uploadScript = transport.UploadArgv("", 0)[2]

// exitUnknown is the shell's "command not found": what an unknown command gets.
const exitUnknown = 127

// answer runs the command line an exec request carried on node i and
// returns its exit status and the name of the route that answered ("" for
// an unknown command, which fails loudly).
func (m *Model) answer(node int, line string, s stdio) (uint32, string) {
	argv, err := splitWords(line)
	if err != nil {
		fmt.Fprintf(s.err, "sim: cannot read the command line: %v\n", err)
		return exitUnknown, ""
	}
	c := parseCall(argv)
	for _, r := range routes {
		if r.match(c) {
			return r.run(m, node, c, s), r.name
		}
	}
	fmt.Fprintf(s.err, "sim: the simulated node does not know this command (add it to internal/sim): %s\n", firstLine(line))
	return exitUnknown, ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 160 {
		line = line[:160] + "…"
	}
	return line
}

func runFacts(m *Model, node int, c call, s stdio) uint32 {
	_, _ = io.WriteString(s.out, m.facts(node, c.args))
	return 0
}

func runTable(m *Model, _ int, c call, s stdio) uint32 {
	_, _ = io.WriteString(s.out, m.table(c.args[2]))
	return 0
}

// fail writes err to stderr and returns status: a command that failed.
func fail(s stdio, status uint32, err error) uint32 {
	fmt.Fprintf(s.err, "%v\n", err)
	return status
}

// runStart is ray start: the environment file arrives on stdin (read, as
// the real one sources it), the flags follow "start".
func runStart(m *Model, node int, c call, s stdio) uint32 {
	_, _ = io.Copy(io.Discard, s.in)
	arrived := time.Now()
	m.mu.Lock()
	h := m.headStart
	m.mu.Unlock()
	head := slices.Contains(c.args[2:], "--head")
	if head {
		time.Sleep(h.GCSListens)
	}
	if err := m.start(node, c.args[2:]); err != nil {
		return fail(s, 1, err)
	}
	if head {
		time.Sleep(time.Until(arrived.Add(h.Returns)))
	}
	return 0
}

func runStop(m *Model, node int, c call, s stdio) uint32 {
	if err := m.stop(node, c.args); err != nil {
		return fail(s, 2, err)
	}
	return 0
}

// runLock holds the node lock until the provider closes stdin, as
// LockScript's flock does; a second holder is refused (exit 73).
func runLock(m *Model, node int, c call, s stdio) uint32 {
	m.mu.Lock()
	held := m.locked[node]
	m.locked[node] = true
	m.mu.Unlock()
	if held {
		return fail(s, 73, fmt.Errorf("another terraform-provider-spark operation holds the lock on this node"))
	}
	_, _ = io.WriteString(s.out, "locked\n")
	_, _ = io.Copy(io.Discard, s.in)
	m.mu.Lock()
	m.locked[node] = false
	m.mu.Unlock()
	return 0
}

func runMarkWrite(m *Model, node int, c call, _ stdio) uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.markers[node][arg(c.args, 1)] = arg(c.args, 2)
	return 0
}

func runMarkRead(m *Model, node int, c call, s stdio) uint32 {
	m.mu.Lock()
	holder, ok := m.markers[node][arg(c.args, 1)]
	m.mu.Unlock()
	if ok {
		_, _ = io.WriteString(s.out, holder+"\n")
	}
	return 0
}

func runMarkRemove(m *Model, node int, c call, _ stdio) uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.markers[node], arg(c.args, 1))
	return 0
}

// runTokenWrite is the token script: "keep" leaves a token already there.
func runTokenWrite(m *Model, node int, c call, s stdio) uint32 {
	b, err := io.ReadAll(s.in)
	if err != nil {
		return fail(s, 1, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if arg(c.args, 1) != "keep" || m.tokens[node] == "" {
		m.tokens[node] = strings.TrimSpace(string(b))
	}
	return 0
}

func runTokenRead(m *Model, node int, _ call, s stdio) uint32 {
	m.mu.Lock()
	t := m.tokens[node]
	m.mu.Unlock()
	if t != "" {
		_, _ = io.WriteString(s.out, t+"\n")
	}
	return 0
}

func runTokenRemove(m *Model, node int, _ call, _ stdio) uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rays[node] == nil {
		m.tokens[node] = ""
	}
	return 0
}

func runHostname(m *Model, node int, _ call, s stdio) uint32 {
	_, _ = io.WriteString(s.out, m.node(node).Hostname+"\n")
	return 0
}

// runCurrentCluster is a read of <temp>/ray/ray_current_cluster, which
// `ray start --head` writes and stopping Ray's processes leaves: its
// address, or cat's failure when there is none (which the provider's
// vLLM read turns into nothing, with "|| true").
func runCurrentCluster(m *Model, node int, c call, s stdio) uint32 {
	m.mu.Lock()
	addr := m.current[node]
	m.mu.Unlock()
	switch {
	case addr != "":
		_, _ = io.WriteString(s.out, addr+"\n")
	case c.has("|| true"):
	default:
		return fail(s, 1, fmt.Errorf("cat: /tmp/ray/ray_current_cluster: No such file or directory"))
	}
	return 0
}

// exited is a command that failed as err says: its own status and stderr
// for an exitError, else 1.
func exited(s stdio, err error) uint32 {
	var e exitError
	if errors.As(err, &e) {
		return fail(s, e.status, e)
	}
	return fail(s, 1, err)
}

// runVLLMDir is vllm.DirScript: $1 the private directory ("" the SSH
// user's), $2 the port; it prints the deployment's directory.
func runVLLMDir(_ *Model, _ int, c call, s stdio) uint32 {
	p, err := strconv.Atoi(arg(c.args, 2))
	if err != nil {
		return fail(s, 1, fmt.Errorf("mkdir: invalid port %q", arg(c.args, 2)))
	}
	dir := deploymentDir(p)
	if private := arg(c.args, 1); private != "" {
		dir = path.Join(private, "vllm-"+arg(c.args, 2))
	}
	_, _ = io.WriteString(s.out, dir+"\n")
	return 0
}

// runLaunchLock holds the launch lock of directory $1 until stdin closes;
// a second holder is refused (exit 75), as LaunchLockScript's flock -n.
func runLaunchLock(m *Model, node int, c call, s stdio) uint32 {
	dir := arg(c.args, 1)
	m.mu.Lock()
	held := m.launchLocks[node][dir]
	m.launchLocks[node][dir] = true
	m.mu.Unlock()
	if held {
		return fail(s, 75, fmt.Errorf("another apply is launching vllm serve here (it holds %s/launch.lock)", dir))
	}
	_, _ = io.WriteString(s.out, "locked\n")
	_, _ = io.Copy(io.Discard, s.in)
	m.mu.Lock()
	delete(m.launchLocks[node], dir)
	m.mu.Unlock()
	return 0
}

// runUpload writes stdin to $1.
func runUpload(m *Model, node int, c call, s stdio) uint32 {
	b, err := io.ReadAll(s.in)
	if err != nil {
		return fail(s, 1, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[node][arg(c.args, 1)] = string(b)
	return 0
}

func runLaunch(m *Model, node int, c call, s stdio) uint32 {
	id, err := m.launch(node, c.args)
	if err != nil {
		return exited(s, err)
	}
	_, _ = io.WriteString(s.out, id+"\n")
	return 0
}

// runVLLMStatus is vllm.StatusScript: "alive" while the process with
// identity $1 runs.
func runVLLMStatus(m *Model, node int, c call, s stdio) uint32 {
	m.mu.Lock()
	alive := m.vllmByID(node, arg(c.args, 1)) != nil
	m.mu.Unlock()
	state := "gone"
	if alive {
		state = "alive"
	}
	_, _ = io.WriteString(s.out, state+"\n")
	return 0
}

// runVLLMStatusFind is vllm.StatusFindScript: runVLLMStatus for $1 and,
// when alive, runFind for $2 after "@@find".
func runVLLMStatusFind(m *Model, node int, c call, s stdio) uint32 {
	m.mu.Lock()
	alive := m.vllmByID(node, arg(c.args, 1)) != nil
	m.mu.Unlock()
	if !alive {
		_, _ = io.WriteString(s.out, "gone\n")
		return 0
	}
	_, _ = io.WriteString(s.out, "alive\n@@find\n")
	if out, err := m.find(node, arg(c.args, 2)); err == nil {
		_, _ = io.WriteString(s.out, out)
	}
	return 0
}

func runVLLMStop(m *Model, node int, c call, s stdio) uint32 {
	if err := m.stopVLLM(node, c.args); err != nil {
		return exited(s, err)
	}
	return 0
}

func runUnfinished(m *Model, node int, c call, s stdio) uint32 {
	_, _ = io.WriteString(s.out, m.unfinished(node, arg(c.args, 1)))
	return 0
}

// runSettled is vllm.SettledScript: the start marker of port $1 goes.
func runSettled(m *Model, node int, c call, _ stdio) uint32 {
	p, _ := strconv.Atoi(arg(c.args, 1))
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files[node], deploymentDir(p)+"/starting")
	return 0
}

func runFind(m *Model, node int, c call, s stdio) uint32 {
	out, err := m.find(node, arg(c.args, 1))
	if err != nil {
		return exited(s, err)
	}
	_, _ = io.WriteString(s.out, out)
	return 0
}

// runLogTail is vllm.LogTailScript: the last $2 lines of $1/server.log.
func runLogTail(m *Model, node int, c call, s stdio) uint32 {
	n, _ := strconv.Atoi(arg(c.args, 2))
	m.mu.Lock()
	log := m.files[node][arg(c.args, 1)+"/server.log"]
	m.mu.Unlock()
	lines := strings.SplitAfter(log, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	_, _ = io.WriteString(s.out, strings.Join(lines, ""))
	return 0
}

// runCat is `cat FILE` of a file the provider wrote, or a test put there.
func runCat(m *Model, node int, c call, s stdio) uint32 {
	m.mu.Lock()
	content, ok := m.files[node][c.argv[1]]
	m.mu.Unlock()
	if !ok {
		return fail(s, 1, fmt.Errorf("cat: %s: No such file or directory", c.argv[1]))
	}
	_, _ = io.WriteString(s.out, content)
	return 0
}
