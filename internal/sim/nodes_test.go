package sim

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
)

func TestSplitWordsUndoesJoin(t *testing.T) {
	for _, argv := range [][]string{
		{"sh", "-c", nodefacts.Script, "sh", "ray", "", "10.20.0.1", "", "10.20.0.1:6379"},
		{"sh", "-c", `it's "quoted" \ and $HOME`, "sh", "a b", "'", `\`, "=x", "\n"},
		{"setsid", "-w", "sh", "-c", "exec \"$@\"", "sh", "ray", "start", "--labels", `{"a":"b c"}`},
	} {
		got, err := splitWords(transport.Join(argv...))
		if err != nil || !slices.Equal(got, argv) {
			t.Errorf("splitWords(Join(%q)) = %q, %v", argv, got, err)
		}
	}
	if _, err := splitWords("sh -c 'open"); err == nil {
		t.Error("an unterminated quote was read")
	}
}

// The model's answers parse as the real commands' output does, and say
// what a healthy cluster's nodes say.
func TestAnswersParse(t *testing.T) {
	m := NewModel(2)
	if err := m.start(0, []string{"--head", "--port", "6379", "--disable-usage-stats"}); err != nil {
		t.Fatal(err)
	}
	if err := m.start(1, []string{"--address", "10.20.0.1:6379", "--num-gpus", "1"}); err != nil {
		t.Fatal(err)
	}
	f, err := nodefacts.Parse(m.facts(1, []string{"ray", "", "10.20.0.1", "6379", "10.20.0.1:6379"}))
	if err != nil {
		t.Fatal(err)
	}
	if f.RouteTo == nil || f.RouteTo.Src != "10.20.0.2" || f.RouteTo.Gateway != "" || f.TCP != "open" || f.GPUCount != 1 ||
		f.RayVersion != RayVersion || f.PythonVersion != PythonVersion || f.DefaultRouteIP != "10.20.0.2" || len(f.Listeners) != 0 {
		t.Errorf("worker facts: %+v", f)
	}
	hf, _ := nodefacts.Parse(m.facts(0, []string{"ray", "", "", "6379", ""}))
	if !slices.Equal(hf.Listeners, []string{"gcs_server"}) {
		t.Errorf("the head's GCS port is held by %q, want gcs_server", hf.Listeners)
	}
	tab, err := ray.ParseNodes(m.table("10.20.0.1:6379"))
	if err != nil || !tab.GCSUp || len(tab.Nodes) != 2 || tab.RayVersion != RayVersion {
		t.Fatalf("table: %+v %v", tab, err)
	}
	if h, ok := tab.Head(); !ok || h.IP != "10.20.0.1" || h.Resources["GPU"] != 1 {
		t.Errorf("head row: %+v", h)
	}
	if down, _ := ray.ParseNodes(m.table("10.20.0.9:6379")); down.GCSUp || !down.GCSGone() {
		t.Errorf("no GCS at 10.20.0.9: %+v", down)
	}
}

func TestUnknownCommandFailsLoudly(t *testing.T) {
	var errb strings.Builder
	status, route := NewModel(1).answer(0, transport.Join("sh", "-c", "rm -rf /", "sh"), stdio{in: strings.NewReader(""), out: &strings.Builder{}, err: &errb})
	if status != exitUnknown || route != "" || !strings.Contains(errb.String(), "does not know this command") {
		t.Errorf("unknown command: status %d, route %q, stderr %q", status, route, errb.String())
	}
}

// Every answer comes one round trip late: a command run on a session
// already open takes at least one (opening the session took another).
func TestAnswersComeOneRoundTripLate(t *testing.T) {
	const rtt = 30 * time.Millisecond
	key, err := NewClientKey()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Start(Options{Nodes: 1, RTT: rtt, ClientKey: key.Authorized})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	signer, err := ssh.ParsePrivateKey(key.PEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", f.Endpoints()[0].String(), &ssh.ClientConfig{User: "sim",
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := s.Output(transport.Join("sh", "-c", nodefacts.Script, "sh", "ray"))
	took := time.Since(start)
	if err != nil || !strings.Contains(string(out), "@@end") {
		t.Fatalf("facts: %v\n%s", err, out)
	}
	if took < rtt {
		t.Errorf("a command answered in %s, less than one round trip (%s)", took, rtt)
	}
	if got := f.Stats(); got.Handshakes != 1 || got.OpenConns != 1 || got.Commands["read node facts"].Count != 1 {
		t.Errorf("stats: %+v", got)
	}
}

// What a test varies on a node reads back, through the real parsers, as
// the real commands would show it.
func TestVariedAnswersParse(t *testing.T) {
	m := NewModel(3)
	if err := m.StartRay(0, "--head", "--port", "6379"); err != nil {
		t.Fatal(err)
	}
	if err := m.start(1, []string{"--address", "10.20.0.1:6379"}); err != nil {
		t.Fatal(err)
	}
	m.SetRayVersion(2, "2.0.0")
	m.HoldPort(2, 8000, "python3")
	m.MoveNode(2, netip.MustParseAddr("10.21.0.3"))
	f, err := nodefacts.Parse(m.facts(2, []string{"ray", "", "10.20.0.1", "8000", ""}))
	if err != nil {
		t.Fatal(err)
	}
	if f.RayVersion != "2.0.0" || !slices.Equal(f.Listeners, []string{"python3"}) || f.RouteTo == nil ||
		f.RouteTo.Gateway != "10.21.255.254" || f.RouteTo.Src != "10.21.0.3" || !f.HasAddress(netip.MustParseAddr("10.21.0.3")) {
		t.Errorf("varied facts: %+v, route %+v", f, f.RouteTo)
	}
	m.SetRayVersion(2, "")
	m.HoldPort(2, 8000, "")
	if f, _ := nodefacts.Parse(m.facts(2, []string{"ray", "", "", "8000", ""})); f.RayVersion != "" || len(f.Listeners) != 0 {
		t.Errorf("no Ray, port let go: %+v", f)
	}

	if err := m.KillRaylet(1); err != nil {
		t.Fatal(err)
	}
	if err := m.KillRaylet(0); err != nil {
		t.Fatal(err)
	}
	tab, err := ray.ParseNodes(m.table("10.20.0.1:6379"))
	if err != nil || !tab.GCSUp || len(tab.Nodes) != 2 {
		t.Fatalf("table with dead nodes: %+v %v", tab, err)
	}
	for _, n := range tab.Nodes {
		if n.Alive {
			t.Errorf("node %s alive after its raylet was killed", n.IP)
		}
	}
	m.Reboot(0)
	if down, _ := ray.ParseNodes(m.table("10.20.0.1:6379")); down.GCSUp || !down.GCSGone() {
		t.Errorf("a rebooted head's GCS answers: %+v", down)
	}
}

// The GCS address Ray recorded on the head is what an import reads; a
// node where no head started has none.
func TestCurrentClusterIsTheHeadsGCS(t *testing.T) {
	m := NewModel(2)
	if err := m.StartRay(0, "--head", "--port", "6380"); err != nil {
		t.Fatal(err)
	}
	read := func(node int, script string) (uint32, string, string) {
		var out, errb strings.Builder
		status, _ := m.answer(node, transport.Join("sh", "-c", script), stdio{in: strings.NewReader(""), out: &out, err: &errb})
		return status, out.String(), errb.String()
	}
	if status, out, _ := read(0, `cat "${TMPDIR:-/tmp}/ray/ray_current_cluster"`); status != 0 || out != "10.20.0.1:6380\n" {
		t.Errorf("on the head: %d %q", status, out)
	}
	if status, _, errs := read(1, `cat "${TMPDIR:-/tmp}/ray/ray_current_cluster"`); status != 1 || !strings.Contains(errs, "No such file") {
		t.Errorf("where no head started: %d %q", status, errs)
	}
	if status, out, _ := read(1, `cat "${TMPDIR:-/tmp}/ray/ray_current_cluster" 2>/dev/null || true`); status != 0 || out != "" {
		t.Errorf("where no head started, read as vLLM's check does: %d %q", status, out)
	}
}

// A vllm serve launched with the provider's own scripts reads back through
// the provider's parsers: its identity, command line and environment
// (import), its listener, its start marker until settled, the placement
// group it holds in the node table; stopped, it is gone.
func TestVLLMAnswersParse(t *testing.T) {
	m := NewModel(2)
	if err := m.StartRay(0, "--head", "--port", "6379"); err != nil {
		t.Fatal(err)
	}
	run := func(script string, stdin string, args ...string) (uint32, string, string) {
		t.Helper()
		var out, errb strings.Builder
		status, route := m.answer(0, transport.Join(transport.Script(script, args...)...), stdio{in: strings.NewReader(stdin), out: &out, err: &errb})
		if route == "" {
			t.Fatalf("unknown command: %s", errb.String())
		}
		return status, out.String(), errb.String()
	}
	_, dir, _ := run(vllm.DirScript, "", "", "8000")
	dir = strings.TrimSpace(dir)
	env, _ := transport.EnvFile(map[string]string{"RAY_ADDRESS": "10.20.0.1:6379", "VLLM_API_KEY": "it's"})
	if status, _, errs := run(transport.UploadArgv("", 0)[2], string(env), dir+"/env", "0600"); status != 0 {
		t.Fatal(errs)
	}
	argv := vllm.ServeArgv(vllm.ServeOptions{Model: "tiny-llama", ServedName: "tiny", TP: 2, PP: 1, Port: 8000})
	status, id, errs := run(vllm.LaunchScript, "", append([]string{dir, "", "sim@test"}, argv...)...)
	id = strings.TrimSpace(id)
	if status != 0 || !strings.Contains(id, ":") {
		t.Fatalf("launch: %d %q %s", status, id, errs)
	}
	if status, _, errs := run(vllm.LaunchScript, "", append([]string{dir, "", "sim@test"}, argv...)...); status != 3 || !strings.Contains(errs, "already running") {
		t.Errorf("a second launch: %d %s", status, errs)
	}

	_, found, _ := run(vllm.FindScript, "", "8000")
	r, err := vllm.ParseFind(found)
	if err != nil || r.Identity != id || r.RayAddress != "10.20.0.1:6379" || r.Options.Command != "/opt/ray/bin/vllm" ||
		r.Options.ServedName != "tiny" || r.Options.TP != 2 || r.Options.Model != "tiny-llama" {
		t.Errorf("find: %+v %v", r, err)
	}
	if _, _, env, _ := m.VLLM(0, 8000); env["VLLM_API_KEY"] != "it's" {
		t.Errorf("the server's environment: %v", env)
	}
	if f, _ := nodefacts.Parse(m.facts(0, []string{"ray", "", "", "8000", ""})); !slices.Equal(f.Listeners, []string{"vllm"}) {
		t.Errorf("port 8000 is held by %q, want vllm", f.Listeners)
	}
	if _, out, _ := run(vllm.UnfinishedScript, "", "8000", ""); out != id+"\nsim@test\n" {
		t.Errorf("unfinished before settled: %q", out)
	}
	run(vllm.SettledScript, "", "8000", "")
	if _, out, _ := run(vllm.UnfinishedScript, "", "8000", ""); out != "" {
		t.Errorf("unfinished after settled: %q", out)
	}
	tab, _ := ray.ParseNodes(m.table("10.20.0.1:6379"))
	if len(tab.PlacementGroups) != 1 || tab.PlacementGroups[0].GPUs != 2 || tab.PlacementGroups[0].State != "CREATED" {
		t.Errorf("placement groups: %+v", tab.PlacementGroups)
	}
	if _, out, _ := run(vllm.StatusScript, "", id); out != "alive\n" {
		t.Errorf("status: %q", out)
	}
	if status, _, errs := run(vllm.StopScript, "", id, "8000", "10", ""); status != 0 {
		t.Fatalf("stop: %s", errs)
	}
	if _, out, _ := run(vllm.StatusScript, "", id); out != "gone\n" {
		t.Errorf("status after the stop: %q", out)
	}
	if status, _, errs := run(vllm.FindScript, "", "8000"); status != 4 || !strings.Contains(errs, "nothing listens on port 8000") {
		t.Errorf("find after the stop: %d %s", status, errs)
	}
}
