// The cluster's plan rules on facts already read: registered addresses,
// planned GPUs and every preflight diagnostic. Nothing here does I/O, so
// every rule the plan applies is unit-tested without a node.

package raycluster

import (
	"fmt"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
)

// plannedGPUs is what Ray will register as GPUs on each node: num_gpus when
// given, else what nvidia-smi lists (Ray's own detection counts the same
// devices). A node with neither makes the total unknowable.
func plannedGPUs(nodes []preflight.Node) *preflight.PlannedGPUs {
	out := &preflight.PlannedGPUs{}
	var parts []string
	for i, n := range nodes {
		g := nodeGPUs(n)
		if g < 0 {
			return nil
		}
		if i == 0 { // the head comes first
			out.Head = g
		}
		out.Total += g
		parts = append(parts, fmt.Sprintf("%s %g", n.Name, g))
	}
	out.Nodes = strings.Join(parts, ", ")
	return out
}

// nodeGPUs is one node's planned GPUs; -1 when not knowable before Ray starts.
func nodeGPUs(n preflight.Node) float64 {
	switch {
	case n.NumGPUs != nil:
		return float64(*n.NumGPUs)
	case n.Facts.HasNvidiaSMI:
		return float64(n.Facts.GPUCount)
	}
	return -1
}

func headNode(s Spec, hf nodefacts.Facts) preflight.Node {
	return preflight.Node{Name: HeadName, Path: s.Head.Path, SSHHost: s.Head.Endpoint.Host, NodeIP: s.Head.NodeIP, NumGPUs: s.Head.NumGPUs, Facts: hf,
		RayCommand: s.Runtime.Ray()}
}

// headAddress is the address the head registers: what it registered, when
// known, else the prediction.
func headAddress(s Spec, o PlanOptions, hf nodefacts.Facts) string {
	if ip, ok := o.Known[HeadName]; ok {
		return ip
	}
	ip, _ := preflight.PredictHeadIP(headNode(s, hf))
	return ip
}

// Evaluate runs every preflight rule of the cluster's plan on facts already
// read from the nodes (workers: name -> facts, read with the route to the
// head's address). It does no I/O, so every rule's call here is unit-tested.
func Evaluate(s Spec, o PlanOptions, hf nodefacts.Facts, workerFacts map[string]nodefacts.Facts) *Plan {
	head := headNode(s, hf)
	p := &Plan{Registered: map[string]string{}, RayVersion: hf.RayVersion,
		Hostnames: map[string]string{HeadName: hf.Hostname}}
	_, diags := preflight.PredictHeadIP(head)
	headIP := headAddress(s, o, hf)
	p.Diagnostics = append(p.Diagnostics, diags...)
	p.Diagnostics = append(p.Diagnostics, addressBound(head, o)...)
	p.Diagnostics = append(p.Diagnostics, preflight.GPUs(head)...)
	if !o.HeadRunning && !o.Replacing {
		d := preflight.GCSPortFree(head, s.GCSPort, o.StartedBy)
		p.StopOrphan = len(d) == 1 && d[0].Warning
		p.Diagnostics = append(p.Diagnostics, d...)
	}
	p.HeadIP = headIP
	p.Registered[HeadName] = headIP
	nodes := []preflight.Node{head}
	if headIP == "" {
		return p
	}
	for _, name := range s.WorkerNames() {
		ws := s.Workers[name]
		w := preflight.Node{Name: name, Path: ws.Path, SSHHost: ws.Endpoint.Host, NodeIP: ws.NodeIP, NumGPUs: ws.NumGPUs, Facts: workerFacts[name],
			RayCommand: s.Runtime.Ray()}
		ip, diags := preflight.PredictWorkerIP(w, headIP)
		if known, ok := o.Known[w.Name]; ok {
			ip = known
		}
		p.Registered[w.Name] = ip
		p.Hostnames[w.Name] = w.Facts.Hostname
		p.Diagnostics = append(p.Diagnostics, diags...)
		p.Diagnostics = append(p.Diagnostics, addressBound(w, o)...)
		p.Diagnostics = append(p.Diagnostics, preflight.GPUs(w)...)
		reach := preflight.WorkerReachesHead(w, headIP, s.GCSPort)
		if _, running := o.Known[w.Name]; running && o.HeadRunning {
			for i := range reach {
				reach[i].Now = true // a running worker cut off from its running head
			}
		}
		p.Diagnostics = append(p.Diagnostics, reach...)
		nodes = append(nodes, w)
	}
	p.GPUs = plannedGPUs(nodes)
	for _, n := range nodes {
		p.Nodes = append(p.Nodes, preflight.ClusterNode{Node: n, IP: p.Registered[n.Name], GPUs: nodeGPUs(n)})
	}
	p.Diagnostics = append(p.Diagnostics, preflight.UniqueIPs(nodes, p.Registered)...)
	p.Diagnostics = append(p.Diagnostics, preflight.SameVersions(nodes)...)
	p.Diagnostics = append(p.Diagnostics, preflight.Interfaces(s.Env, nodes, p.Registered)...)
	p.Diagnostics = append(p.Diagnostics, preflight.WorkerHostIP(s.Env, nodes, p.Registered)...)
	if s.AuthToken {
		p.Diagnostics = append(p.Diagnostics, preflight.TokenAuthSupported(nodes)...)
	}
	return p
}

// addressBound (D3): a running node's registered address must still be on
// it (a fault now); otherwise node_ip must be an address of the node.
func addressBound(n preflight.Node, o PlanOptions) []finding.Finding {
	if registered, running := o.Known[n.Name]; running {
		if gone := preflight.RegisteredAddressGone(n, registered); gone != nil {
			return gone
		}
	}
	return preflight.NodeIPBound(n)
}
