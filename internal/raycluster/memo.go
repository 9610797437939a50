// The plan memo: what a cluster's plan concluded in this provider process,
// kept for the plans that come after it in the same run (the deployments on
// that cluster, and the second call of a replacement's plan). Terraform
// plans them in the same process, so memory is enough: nothing is written
// to the nodes.

package raycluster

import (
	"net"
	"strconv"
	"sync"

	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Planned is what a cluster's plan concluded, kept for the deployments
// planned after it in the same run: they reference its head_address, so
// Terraform plans them later, in the same provider process. On a first plan
// (cluster and deployment in one configuration) no Ray runs yet; this is
// what the deployment's checks have instead of Ray's table.
type Planned struct {
	GPUs    *preflight.PlannedGPUs // nil when a node's GPUs cannot be known before Ray starts
	Runtime nodeexec.Runtime
	// Nodes (head first) with the facts the cluster's plan read, and how to
	// reach each (by node name): the deployment's rules about the nodes
	// that host vLLM's workers use them, and read their model listings.
	Nodes     []preflight.ClusterNode
	Endpoints map[string]transport.Endpoint
	Env       map[string]string // the cluster's env: what its Ray processes start with
}

// planMemo is the plan memo: every cluster plan's conclusion in this
// process, and the clusters plans found running. Terraform plans
// independent resources concurrently through one provider process, so
// every method takes the lock; the zero value is ready to use.
//
// It holds what a plan concluded, not what runs: a later apply or a
// refresh reads the nodes again. An entry is never dropped (a run is one
// process, short-lived); a second plan of the same cluster replaces its
// entry.
type planMemo struct {
	mu      sync.Mutex
	plans   map[string]Planned // GCS address (the cluster's head_address) -> its plan
	running map[string]bool    // head SSH host:GCS port -> a resource's cluster runs there
}

// record keeps p as the plan of the cluster whose GCS address is gcsAddr.
// The value is stored as given, maps and slices shared: readers must not
// change it.
func (pm *planMemo) record(gcsAddr string, p Planned) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.plans == nil {
		pm.plans = map[string]Planned{}
	}
	pm.plans[gcsAddr] = p
}

// plan is the last plan recorded for gcsAddr; false when no plan of a
// cluster at exactly that address (IP and port) ran in this process.
func (pm *planMemo) plan(gcsAddr string) (Planned, bool) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	p, ok := pm.plans[gcsAddr]
	return p, ok
}

// noteRunning marks a cluster as running on head (an SSH host) at gcsPort.
func (pm *planMemo) noteRunning(head string, gcsPort int) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if pm.running == nil {
		pm.running = map[string]bool{}
	}
	pm.running[runningKey(head, gcsPort)] = true
}

// isRunning reports whether noteRunning marked head and gcsPort.
func (pm *planMemo) isRunning(head string, gcsPort int) bool {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	return pm.running[runningKey(head, gcsPort)]
}

// runningKey joins host and port as an address does, so an IPv6 host and
// a port cannot be read as another host and port.
func runningKey(head string, gcsPort int) string {
	return net.JoinHostPort(head, strconv.Itoa(gcsPort))
}

// RecordPlan keeps what a cluster's plan concluded, by its GCS address.
func (m *Manager) RecordPlan(gcsAddr string, p Planned) {
	m.memo.record(gcsAddr, p)
}

// PlannedCluster returns what the plan of the cluster at gcsAddr concluded
// in this run, if one was planned.
func (m *Manager) PlannedCluster(gcsAddr string) (Planned, bool) {
	return m.memo.plan(gcsAddr)
}

// NoteRunning records that a resource's cluster runs on head (its SSH
// host) at gcsPort, as a plan with its prior state found it. Terraform
// plans a replacement in two calls, the second without the prior state:
// there, a GCS port held by a cluster noted here is the cluster being
// replaced, which the apply destroys before it creates the new one.
func (m *Manager) NoteRunning(head string, gcsPort int) {
	m.memo.noteRunning(head, gcsPort)
}

// Running reports whether NoteRunning recorded a cluster on head at gcsPort
// in this run.
func (m *Manager) Running(head string, gcsPort int) bool {
	return m.memo.isRunning(head, gcsPort)
}
