package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
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
