package mpplan

import (
	"github.com/lab-infra/terraform-provider-spark/internal/fabric"
	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
)

// D33 is the fabric between the nodes (preflight.FabricLinks on the Ray
// path).
const D33 = preflight.D33

// FabricLinks (D33) judges the link between rank 0's node and each other
// node, on their node_ip (internal/fabric). A node's interface that is down
// is D27's; env is the deployment's (NCCL_IB_HCA).
func FabricLinks(s Spec, env map[string]string, seen map[string]Seen) []finding.Finding {
	if len(s.Nodes) < 2 {
		return nil
	}
	r0, ok := seen[s.Nodes[0].Name]
	if !ok {
		return nil
	}
	head := fabric.End{Node: s.Nodes[0].Name, IP: s.Nodes[0].NodeIP, Facts: r0.Facts}
	var out []finding.Finding
	for _, n := range s.Nodes[1:] {
		sn, ok := seen[n.Name]
		if !ok {
			continue
		}
		for _, p := range fabric.CheckPair(head, fabric.End{Node: n.Name, IP: n.NodeIP, Facts: sn.Facts}, env) {
			if p.Down != "" {
				continue // D27: a node's interface is down
			}
			out = append(out, finding.Finding{Rule: D33, Warning: p.Warning, Node: p.Node, Path: nodePath(findNode(s, p.Node), ""),
				Summary: p.Summary, Detail: p.Detail})
		}
	}
	return out
}

func findNode(s Spec, name string) Node {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n
		}
	}
	return Node{Name: name}
}
