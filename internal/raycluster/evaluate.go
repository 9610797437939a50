// The cluster's plan on facts already read: the nodes as the plan rules
// take them (preflight.CheckCluster, beside the deployment's
// preflight.CheckDeployment), and the plan built from what they conclude.
// Nothing here does I/O, so every rule the plan applies is unit-tested
// without a node.

package raycluster

import (
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
)

func headNode(s Spec, hf nodefacts.Facts) preflight.Node {
	return preflight.Node{Name: HeadName, Path: s.Head.Path, SSHHost: s.Head.Endpoint.Host, NodeIP: s.Head.NodeIP, NumGPUs: s.Head.NumGPUs, Interface: s.Head.Interface, Facts: hf,
		RayCommand: s.Runtime.Ray()}
}

// headAddress is the address the head registers: what it registered, when
// known, else the prediction.
func headAddress(s Spec, o PlanOptions, hf nodefacts.Facts) string {
	ip, _ := preflight.HeadAddress(headNode(s, hf), o.Known)
	return ip
}

// Evaluate runs every rule of the cluster's plan on facts already read
// from the nodes (workers: name -> facts, read with the route to the
// head's address).
func Evaluate(s Spec, o PlanOptions, hf nodefacts.Facts, workerFacts map[string]nodefacts.Facts) *Plan {
	c := preflight.Cluster{Head: headNode(s, hf), GCSPort: s.GCSPort, Env: s.Env, AuthToken: s.AuthToken,
		Known: o.Known, HeadRunning: o.HeadRunning, Replacing: o.Replacing, StartedBy: o.StartedBy}
	for _, name := range s.WorkerNames() {
		ws := s.Workers[name]
		c.Workers = append(c.Workers, preflight.Node{Name: name, Path: ws.Path, SSHHost: ws.Endpoint.Host, NodeIP: ws.NodeIP, NumGPUs: ws.NumGPUs, Interface: ws.Interface,
			Facts: workerFacts[name], RayCommand: s.Runtime.Ray()})
	}
	cp := preflight.CheckCluster(c)
	p := &Plan{HeadIP: cp.HeadIP, Registered: cp.Registered, RayVersion: hf.RayVersion, GPUs: cp.GPUs, Nodes: cp.Nodes,
		Diagnostics: cp.Findings, StopOrphan: cp.StopOrphan, Hostnames: map[string]string{HeadName: hf.Hostname}}
	if cp.HeadIP != "" {
		for _, w := range c.Workers {
			p.Hostnames[w.Name] = w.Facts.Hostname
		}
	}
	return p
}
