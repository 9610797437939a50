package preflight

import (
	"fmt"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
)

// Cluster is everything a Ray cluster's plan looks at: its nodes with the
// facts read from each (workers read with the route to the head's
// address), and what runs already.
type Cluster struct {
	Head      Node
	Workers   []Node // in the plan's order
	GCSPort   int
	Env       map[string]string
	AuthToken bool // auth_mode = "token"
	// Known: the nodes Ray registered already (name -> IP): their address
	// is a fact, not a prediction.
	Known map[string]string
	// HeadRunning: the head is this resource's and up, so its GCS port is
	// expected to be held and workers can probe it. Replacing: this
	// resource's own cluster holds the port and the plan replaces it.
	HeadRunning, Replacing bool
	// StartedBy is the start marker of a create on this head and GCS port
	// that never finished ("" none): its Ray is an orphan the apply stops.
	StartedBy string
}

// ClusterPlan is what the cluster's rules concluded.
type ClusterPlan struct {
	HeadIP     string            // "" when the head's address cannot be told
	Registered map[string]string // node name -> the IP Ray will register
	GPUs       *PlannedGPUs      // nil when a node's GPUs cannot be known before Ray starts
	Nodes      []ClusterNode     // every node (head first); nil when HeadIP is ""
	StopOrphan bool              // the GCS port is held by an unfinished create's Ray (D12, a warning)
	Findings   []finding.Finding
}

// HeadAddress is the address the head registers: what it registered, when
// it runs, else the prediction (D14), with what the prediction found.
func HeadAddress(head Node, known map[string]string) (string, []finding.Finding) {
	ip, found := PredictHeadIP(head)
	if registered, ok := known[head.Name]; ok {
		return registered, found
	}
	return ip, found
}

// CheckCluster runs every rule of a cluster's plan (D3-D5, D9, D10, D12-D16)
// on facts already read. It does no I/O, so every rule's call here is
// unit-tested (internal/raycluster's evaluate_test.go drives it whole).
func CheckCluster(c Cluster) ClusterPlan {
	headIP, found := HeadAddress(c.Head, c.Known)
	p := ClusterPlan{Registered: map[string]string{}, Findings: found}
	p.Findings = append(p.Findings, addressBound(c.Head, c.Known)...)
	p.Findings = append(p.Findings, GPUs(c.Head)...)
	if !c.HeadRunning && !c.Replacing {
		d := GCSPortFree(c.Head, c.GCSPort, c.StartedBy)
		p.StopOrphan = len(d) == 1 && d[0].Warning
		p.Findings = append(p.Findings, d...)
	}
	p.HeadIP = headIP
	p.Registered[c.Head.Name] = headIP
	if headIP == "" {
		return p
	}
	nodes := []Node{c.Head}
	for _, w := range c.Workers {
		p.Findings = append(p.Findings, checkWorker(c, w, headIP, p.Registered)...)
		nodes = append(nodes, w)
	}
	p.GPUs = plannedGPUs(nodes)
	for _, n := range nodes {
		p.Nodes = append(p.Nodes, ClusterNode{Node: n, IP: p.Registered[n.Name], GPUs: nodeGPUs(n)})
	}
	p.Findings = append(p.Findings, UniqueIPs(nodes, p.Registered)...)
	p.Findings = append(p.Findings, SameVersions(nodes)...)
	p.Findings = append(p.Findings, RayRelease(c.Head.Facts.RayVersion, "the head ("+c.Head.SSHHost+")", c.Head.attr("ssh_host"))...)
	p.Findings = append(p.Findings, Interfaces(c.Env, nodes, p.Registered)...)
	p.Findings = append(p.Findings, NodeInterfaces(c.Env, nodes, p.Registered)...)
	p.Findings = append(p.Findings, WorkerHostIP(c.Env, nodes, p.Registered)...)
	p.Findings = append(p.Findings, FabricLinks(c.Env, nodes, p.Registered, c.HeadRunning)...)
	if c.AuthToken {
		p.Findings = append(p.Findings, TokenAuthSupported(nodes)...)
	}
	return p
}

// checkWorker runs the rules of one worker, and records the address it
// registers (known, or predicted with the route to the head).
func checkWorker(c Cluster, w Node, headIP string, registered map[string]string) []finding.Finding {
	ip, found := PredictWorkerIP(w, headIP)
	known, running := c.Known[w.Name]
	if running {
		ip = known
	}
	registered[w.Name] = ip
	found = append(found, addressBound(w, c.Known)...)
	found = append(found, GPUs(w)...)
	reach := WorkerReachesHead(w, headIP, c.GCSPort)
	reach = append(reach, HeadReachesWorker(c.Head, w, ip)...)
	if running && c.HeadRunning {
		for i := range reach {
			reach[i].Now = true // a running worker cut off from its running head
		}
	}
	return append(found, reach...)
}

// addressBound (D3): a running node's registered address must still be on
// it (a fault now); otherwise node_ip must be an address of the node.
func addressBound(n Node, known map[string]string) []finding.Finding {
	if registered, running := known[n.Name]; running {
		if gone := RegisteredAddressGone(n, registered); gone != nil {
			return gone
		}
	}
	return NodeIPBound(n)
}

// plannedGPUs is what Ray will register as GPUs on each node: num_gpus when
// given, else what nvidia-smi lists (Ray's own detection counts the same
// devices). A node with neither makes the total unknowable.
func plannedGPUs(nodes []Node) *PlannedGPUs {
	out := &PlannedGPUs{}
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
func nodeGPUs(n Node) float64 {
	switch {
	case n.NumGPUs != nil:
		return float64(*n.NumGPUs)
	case n.Facts.HasNvidiaSMI:
		return float64(n.Facts.GPUCount)
	}
	return -1
}
