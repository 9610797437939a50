package raycluster

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// box is a multi-homed DGX Spark's facts: external (default route) and fabric.
func box(external, fabric string) nodefacts.Facts {
	return nodefacts.Facts{
		Hostname: "spark",
		Interfaces: []nodefacts.Interface{
			{Name: "enP7s7", Up: true, Addresses: []netip.Prefix{netip.MustParsePrefix(external + "/16")}},
			{Name: "enp1s0f1np1", Up: true, Addresses: []netip.Prefix{netip.MustParsePrefix(fabric + "/24")}},
		},
		DefaultRouteIP: external, RayVersion: "2.52.1", PythonVersion: "3.12.3", HasNvidiaSMI: true, GPUCount: 1,
	}
}

// fabricPair is a clean two-node plan on the fabric; each case below breaks
// one thing, so that every rule Evaluate calls has a case that fails when
// its call is removed.
func fabricPair() (Spec, nodefacts.Facts, map[string]nodefacts.Facts) {
	one := int64(1)
	s := Spec{
		Head:    NodeSpec{Name: HeadName, Path: finding.Attr("head"), Endpoint: transport.Endpoint{Host: "10.1.230.180"}, NodeIP: "192.168.200.12", NumGPUs: &one},
		Workers: map[string]NodeSpec{"spark2": {Name: "spark2", Path: finding.Attr("workers").Key("spark2"), Endpoint: transport.Endpoint{Host: "10.1.230.181"}, NodeIP: "192.168.200.13", NumGPUs: &one}},
		GCSPort: 6379, AuthToken: true,
	}
	w := box("10.1.230.181", "192.168.200.13")
	w.RouteTo = &nodefacts.Route{Dst: "192.168.200.12", Dev: "enp1s0f1np1", Src: "192.168.200.13"}
	return s, box("10.1.230.180", "192.168.200.12"), map[string]nodefacts.Facts{"spark2": w}
}

func summaries(p *Plan) string {
	var out []string
	for _, d := range p.Diagnostics {
		out = append(out, d.Summary)
	}
	return strings.Join(out, " | ")
}

func TestEvaluateCleanPlan(t *testing.T) {
	s, hf, wf := fabricPair()
	o := PlanOptions{}
	p := Evaluate(s, o, hf, wf)
	if len(p.Diagnostics) != 0 {
		t.Fatalf("clean plan flagged: %s", summaries(p))
	}
	if p.HeadIP != "192.168.200.12" || p.Registered["spark2"] != "192.168.200.13" {
		t.Fatalf("registered: %v", p.Registered)
	}
	if p.GPUs == nil || p.GPUs.Total != 2 || p.GPUs.Nodes != "head 1, spark2 1" {
		t.Fatalf("planned GPUs: %+v", p.GPUs)
	}
}

// ruleBreak is one rule the cluster's plan calls, and a change to
// fabricPair's clean plan that trips it.
type ruleBreak struct {
	rule   string
	break_ func(s *Spec, hf *nodefacts.Facts, wf map[string]nodefacts.Facts)
}

// headRuleBreaks trip the rules on the head alone.
func headRuleBreaks() []ruleBreak {
	return []ruleBreak{
		{"node_ip is not an address of this node", func(s *Spec, _ *nodefacts.Facts, _ map[string]nodefacts.Facts) {
			s.Head.NodeIP = "192.168.200.99"
		}},
		{"Cannot predict the head's Ray address", func(s *Spec, hf *nodefacts.Facts, _ map[string]nodefacts.Facts) {
			s.Head.NodeIP, hf.DefaultRouteIP = "", ""
		}},
		{"num_gpus exceeds the node's GPUs", func(s *Spec, hf *nodefacts.Facts, _ map[string]nodefacts.Facts) {
			hf.GPUCount = 0
		}},
		{"GCS port is already in use on the head", func(_ *Spec, hf *nodefacts.Facts, _ map[string]nodefacts.Facts) {
			hf.Listeners = []string{"gcs_server"}
		}},
	}
}

// workerRuleBreaks trip the rules on a worker alone, or on its way to the head.
func workerRuleBreaks() []ruleBreak {
	return []ruleBreak{
		{"node_ip is not an address of this node", func(s *Spec, _ *nodefacts.Facts, _ map[string]nodefacts.Facts) {
			w := s.Workers["spark2"]
			w.NodeIP = "192.168.200.99"
			s.Workers["spark2"] = w
		}},
		{"num_gpus exceeds the node's GPUs", func(_ *Spec, _ *nodefacts.Facts, wf map[string]nodefacts.Facts) {
			f := wf["spark2"]
			f.GPUCount = 0
			wf["spark2"] = f
		}},
		{"Worker has no route to the head", func(s *Spec, _ *nodefacts.Facts, wf map[string]nodefacts.Facts) {
			w := s.Workers["spark2"]
			w.NodeIP = ""
			s.Workers["spark2"] = w
			f := wf["spark2"]
			f.RouteTo = nil
			wf["spark2"] = f
		}},
		{"The head cannot reach the worker", func(_ *Spec, hf *nodefacts.Facts, _ map[string]nodefacts.Facts) {
			hf.PeerRoutes = map[string]*nodefacts.Route{"192.168.200.13": nil}
		}},
		{"Worker reaches the head only through a gateway", func(_ *Spec, _ *nodefacts.Facts, wf map[string]nodefacts.Facts) {
			f := wf["spark2"]
			f.RouteTo = &nodefacts.Route{Dst: "192.168.200.12", Gateway: "10.1.0.1", Dev: "enP7s7", Src: "10.1.230.181"}
			wf["spark2"] = f
		}},
	}
}

// clusterRuleBreaks trip the rules that compare the nodes, or read the
// cluster's env and settings.
func clusterRuleBreaks() []ruleBreak {
	return []ruleBreak{
		{"Two nodes would register the same IP", func(s *Spec, _ *nodefacts.Facts, _ map[string]nodefacts.Facts) {
			w := s.Workers["spark2"]
			w.NodeIP = "192.168.200.12"
			s.Workers["spark2"] = w
		}},
		{"Ray versions differ across nodes", func(_ *Spec, _ *nodefacts.Facts, wf map[string]nodefacts.Facts) {
			f := wf["spark2"]
			f.RayVersion = "2.51.0"
			wf["spark2"] = f
		}},
		{"Interface named in env does not exist", func(s *Spec, _ *nodefacts.Facts, _ map[string]nodefacts.Facts) {
			s.Env = map[string]string{"NCCL_SOCKET_IFNAME": "ib0"}
		}},
		{"Interface does not exist on its node", func(s *Spec, _ *nodefacts.Facts, _ map[string]nodefacts.Facts) {
			w := s.Workers["spark2"]
			w.Interface = "enp1s0f0np0"
			s.Workers["spark2"] = w
		}},
		{"VLLM_HOST_IP in env does not match the nodes' Ray addresses", func(s *Spec, _ *nodefacts.Facts, _ map[string]nodefacts.Facts) {
			s.Env = map[string]string{"VLLM_HOST_IP": "192.168.200.12"}
		}},
		{"Ray is older than the releases the plan can read", func(s *Spec, hf *nodefacts.Facts, wf map[string]nodefacts.Facts) {
			s.AuthToken = false
			hf.RayVersion = "2.5.0"
			f := wf["spark2"]
			f.RayVersion = "2.5.0"
			wf["spark2"] = f
		}},
		{"Ray too old for token authentication", func(_ *Spec, hf *nodefacts.Facts, wf map[string]nodefacts.Facts) {
			hf.RayVersion = "2.40.0"
			f := wf["spark2"]
			f.RayVersion = "2.40.0"
			wf["spark2"] = f
		}},
	}
}

// Each rule the cluster's plan calls, and the fact that trips it.
func TestEvaluateCallsEveryRule(t *testing.T) {
	for _, c := range slices.Concat(headRuleBreaks(), workerRuleBreaks(), clusterRuleBreaks()) {
		t.Run(c.rule, func(t *testing.T) {
			s, hf, wf := fabricPair()
			o := PlanOptions{}
			c.break_(&s, &hf, wf)
			p := Evaluate(s, o, hf, wf)
			if got := summaries(p); !strings.Contains(got, c.rule) {
				t.Fatalf("want %q, got: %s", c.rule, got)
			}
		})
	}
}

// A running head's port is its own, and known addresses are facts.
func TestEvaluateRunningHead(t *testing.T) {
	s, hf, wf := fabricPair()
	o := PlanOptions{}
	hf.Listeners = []string{"gcs_server"}
	o.HeadRunning = true
	o.Known = map[string]string{HeadName: "192.168.200.12"}
	if p := Evaluate(s, o, hf, wf); len(p.Diagnostics) != 0 {
		t.Fatalf("running head flagged: %s", summaries(p))
	}
}

// A replace stops the resource's own cluster first: the port it holds is
// not refused. Without Replacing, the same port is.
func TestEvaluateReplacingOwnCluster(t *testing.T) {
	s, hf, wf := fabricPair()
	hf.Listeners = []string{"gcs_server"}
	if p := Evaluate(s, PlanOptions{Replacing: true}, hf, wf); len(p.Diagnostics) != 0 || p.StopOrphan {
		t.Fatalf("replacing: %s", summaries(p))
	}
	if p := Evaluate(s, PlanOptions{}, hf, wf); len(p.Diagnostics) != 1 {
		t.Fatalf("not replacing: want the port refused, got %s", summaries(p))
	}
}

// The Ray of a create that never finished (its start marker beside it) is
// stopped and replaced; the same Ray without the marker is refused.
func TestEvaluateOrphanOfAnUnfinishedCreate(t *testing.T) {
	s, hf, wf := fabricPair()
	hf.Listeners = []string{"gcs_server"}
	p := Evaluate(s, PlanOptions{StartedBy: "terraform-provider-spark pid 42 on ops"}, hf, wf)
	if !p.StopOrphan || len(p.Diagnostics) != 1 || !p.Diagnostics[0].Warning {
		t.Fatalf("orphan: StopOrphan=%v %s", p.StopOrphan, summaries(p))
	}
	p = Evaluate(s, PlanOptions{}, hf, wf)
	if p.StopOrphan || len(p.Diagnostics) != 1 || p.Diagnostics[0].Warning {
		t.Fatalf("someone else's Ray must be refused, not stopped: StopOrphan=%v %s", p.StopOrphan, summaries(p))
	}
}

func TestPlannedGPUsUnknownWithoutNvidiaSMI(t *testing.T) {
	s, hf, wf := fabricPair()
	o := PlanOptions{}
	w := s.Workers["spark2"]
	w.NumGPUs = nil
	s.Workers["spark2"] = w
	f := wf["spark2"]
	f.HasNvidiaSMI = false
	wf["spark2"] = f
	if p := Evaluate(s, o, hf, wf); p.GPUs != nil {
		t.Fatalf("GPUs of a node with neither num_gpus nor nvidia-smi cannot be known, got %+v", p.GPUs)
	}
}

// The head is asked for its routes to the workers' addresses known before
// the read: what a running worker registered, else its node_ip; IPv4 only
// (the script asks `ip -4`), each once.
func TestKnownWorkerIPs(t *testing.T) {
	s := Spec{Workers: map[string]NodeSpec{
		"a": {Name: "a", NodeIP: "192.168.200.13"},
		"b": {Name: "b"},
		"c": {Name: "c", NodeIP: "fd00::3"},
		"d": {Name: "d", NodeIP: "192.168.200.13"},
		"e": {Name: "e", NodeIP: "192.168.200.99"},
	}}
	got := knownWorkerIPs(s, PlanOptions{Known: map[string]string{"b": "192.168.200.14", "e": "192.168.200.15"}})
	if want := []string{"192.168.200.13", "192.168.200.14", "192.168.200.15"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
