// The plan memo: what a cluster's plan concluded in this provider process,
// kept for the plans that come after it in the same run (the deployments on
// that cluster, and the second call of a replacement's plan). Terraform
// plans them in the same process, so memory is enough: nothing is written
// to the nodes.

package raycluster

import (
	"net"
	"strconv"

	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/runtime"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Planned is what a cluster's plan concluded, kept for the deployments
// planned after it in the same run: they reference its head_address, so
// Terraform plans them later, in the same provider process. On a first plan
// (cluster and deployment in one configuration) no Ray runs yet; this is
// what the deployment's checks have instead of Ray's table.
type Planned struct {
	GPUs    *preflight.PlannedGPUs // nil when a node's GPUs cannot be known before Ray starts
	Runtime runtime.Runtime
	// Nodes (head first) with the facts the cluster's plan read, and how to
	// reach each (by node name): the deployment's rules about the nodes
	// that host vLLM's workers use them, and read their model listings.
	Nodes     []preflight.ClusterNode
	Endpoints map[string]transport.Endpoint
	Env       map[string]string // the cluster's env: what its Ray processes start with
}

// RecordPlan keeps what a cluster's plan concluded, by its GCS address.
func (m *Manager) RecordPlan(gcsAddr string, p Planned) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.planned == nil {
		m.planned = map[string]Planned{}
	}
	m.planned[gcsAddr] = p
}

// PlannedCluster returns what the plan of the cluster at gcsAddr concluded
// in this run, if one was planned.
func (m *Manager) PlannedCluster(gcsAddr string) (Planned, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.planned[gcsAddr]
	return p, ok
}

// NoteRunning records that a resource's cluster runs on head (its SSH
// host) at gcsPort, as a plan with its prior state found it. Terraform
// plans a replacement in two calls, the second without the prior state:
// there, a GCS port held by a cluster noted here is the cluster being
// replaced, which the apply destroys before it creates the new one.
func (m *Manager) NoteRunning(head string, gcsPort int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running == nil {
		m.running = map[string]bool{}
	}
	m.running[net.JoinHostPort(head, strconv.Itoa(gcsPort))] = true
}

// Running reports whether NoteRunning recorded a cluster on head at gcsPort
// in this run.
func (m *Manager) Running(head string, gcsPort int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running[net.JoinHostPort(head, strconv.Itoa(gcsPort))]
}
