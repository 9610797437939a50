package preflight

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// Placement is what the placement rules look at.
type Placement struct {
	PlacementIP string // host_ip (VLLM_HOST_IP), else vLLM's own detection on the head
	HostIPGiven bool
	HeadIP      string     // the address Ray registered (or will register) for the head, where vllm serve runs
	Table       *ray.Table // the live node table; nil when the cluster is not up yet
	TP, PP      int
}

// PlacementIdentity (D1, the field report): vLLM pins bundle 0 of its
// placement group to node:<placement ip>. That must be a label Ray
// registered for an alive node, and that node must be the one vllm serve
// runs on (the head), or bundle 0 can never be placed.
func PlacementIdentity(p Placement) []Diagnostic {
	registered := p.HeadIP
	onHead := p.PlacementIP == registered
	elsewhere := false
	if p.Table != nil {
		if n, ok := p.Table.Alive(p.PlacementIP); ok {
			onHead = onHead && n.IsHead
			elsewhere = !n.IsHead
		} else {
			onHead = false
		}
	}
	if onHead {
		return nil
	}
	source := "host_ip"
	if !p.HostIPGiven {
		source = "vLLM's own detection on the head (host_ip unset: the route to 8.8.8.8)"
	}
	why := fmt.Sprintf("no alive Ray node carries the label node:%s, so bundle 0 of vLLM's placement group can never be placed", p.PlacementIP)
	if elsewhere {
		why = fmt.Sprintf("node:%s belongs to a worker, not to the head where vllm serve runs, so vLLM's driver and its bundle 0 would be on different nodes", p.PlacementIP)
	}
	return []Diagnostic{{Attr: []string{"host_ip"},
		Summary: "vLLM placement address does not match the address Ray registered for the head",
		Detail: fmt.Sprintf("vLLM would pin its placement group to node:%s (from %s), but Ray %s the head as node:%s.\n"+
			"Registered nodes: %s.\n"+
			"Why it fails: %s. vLLM would wait, then report \"No available node types can fulfill resource request\" "+
			"or \"Cannot provide a placement group\", although `ray status` shows the GPUs.\n"+
			"Fix, either:\n  host_ip = %q  (what Ray registered for the head), or\n"+
			"  start the head with node_ip = %q  (so Ray registers the address you meant).",
			p.PlacementIP, source, verb(p), registered, labels(p), why, registered, p.PlacementIP)}}
}

func verb(p Placement) string {
	if p.Table == nil {
		return "will register"
	}
	return "registered"
}

// labels lists node:<ip> labels, head marked, GPUs per node.
func labels(p Placement) string {
	if p.Table == nil {
		return fmt.Sprintf("node:%s (head; the cluster is not running yet, so this is the planned address)", p.HeadIP)
	}
	var out []string
	for _, n := range p.Table.Nodes {
		if !n.Alive {
			continue
		}
		s := fmt.Sprintf("node:%s (%s, %g GPU)", n.IP, map[bool]string{true: "head", false: "worker"}[n.IsHead], n.Resources["GPU"])
		out = append(out, s)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none alive"
	}
	return strings.Join(out, ", ")
}

// ParallelFits (D8): TP x PP bundles of one GPU each must fit the GPUs of
// the alive nodes Ray registered.
func ParallelFits(p Placement) []Diagnostic {
	if p.Table == nil {
		return nil
	}
	var total float64
	for _, n := range p.Table.Nodes {
		if n.Alive {
			total += n.Resources["GPU"]
		}
	}
	need := p.TP * p.PP
	if float64(need) <= total {
		return nil
	}
	return []Diagnostic{{Attr: []string{"tensor_parallel_size"},
		Summary: "Tensor x pipeline parallel size exceeds the cluster's GPUs",
		Detail: fmt.Sprintf("tensor_parallel_size %d x pipeline_parallel_size %d = %d GPUs, but the alive nodes Ray registered have %g "+
			"(%s). vLLM would wait for a placement group that can never be placed. Lower the sizes, or add workers with GPUs.",
			p.TP, p.PP, need, total, labels(p))}}
}
