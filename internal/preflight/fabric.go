package preflight

import (
	"github.com/lab-infra/terraform-provider-spark/internal/fabric"
	"github.com/lab-infra/terraform-provider-spark/internal/finding"
)

// FabricLinks (D33): the link between the head and each worker, on the
// addresses Ray registers (internal/fabric): a port down is refused (a
// fault now where the cluster runs); MTUs or speeds that differ, and an
// NCCL_IB_HCA in env that leaves out a port's RDMA device, are warned of.
func FabricLinks(env map[string]string, nodes []Node, registered map[string]string, running bool) []finding.Finding {
	if len(nodes) < 2 {
		return nil
	}
	head := fabric.End{Node: nodes[0].Name, IP: registered[nodes[0].Name], Facts: nodes[0].Facts}
	var out []finding.Finding
	for _, w := range nodes[1:] {
		end := fabric.End{Node: w.Name, IP: registered[w.Name], Facts: w.Facts}
		for _, p := range fabric.CheckPair(head, end, env) {
			n := findNode(nodes, p.Node)
			if p.Down != "" && p.Down == n.Interface {
				continue // D9 refuses a node's own interface that is down
			}
			out = append(out, finding.Finding{Rule: D33, Warning: p.Warning, Now: running && !p.Warning, Node: p.Node,
				Path: n.attr("ssh_host"), Summary: p.Summary, Detail: p.Detail})
		}
	}
	return out
}
