// Package planmemo is the plan memo: what the plans of one provider process
// concluded, kept for the plans that come after them in the same run. A
// deployment references its cluster's head_address and its model's path,
// so Terraform plans it after them, in the same process: memory is enough,
// nothing is written to the nodes. It holds what a plan concluded, not
// what runs (an apply or a refresh reads the nodes again); an entry is
// never dropped (a run is one short-lived process), and a second plan of
// the same cluster or directory replaces its entry.
//
// Terraform plans independent resources concurrently through one provider
// process, so every method takes the lock; the zero value is ready to use.
package planmemo

import (
	"net"
	"strconv"
	"sync"

	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Cluster is what a cluster's plan concluded. On a first plan (cluster and
// deployment in one configuration) no Ray runs yet; this is what the
// deployment's checks have instead of Ray's table.
type Cluster struct {
	GPUs    *preflight.PlannedGPUs // nil when a node's GPUs cannot be known before Ray starts
	Runtime nodeexec.Runtime
	// Nodes (head first) with the facts the cluster's plan read, and how to
	// reach each (by node name): the deployment's rules about the nodes
	// that host vLLM's workers use them, and read their model listings.
	Nodes     []preflight.ClusterNode
	Endpoints map[string]transport.Endpoint
	Env       map[string]string // the cluster's env: what its Ray processes start with
}

// Memo is every plan's conclusion in this process.
type Memo struct {
	mu       sync.Mutex
	clusters map[string]Cluster         // GCS address (the cluster's head_address) -> its plan
	running  map[string]bool            // head SSH host:GCS port -> a resource's cluster runs there
	models   map[dirOn]map[string]int64 // a directory on a node -> the files a spark_model puts there
}

type dirOn struct{ host, dir string }

// RecordCluster keeps c as the plan of the cluster whose GCS address is
// gcsAddr. The value is stored as given, maps and slices shared: readers
// must not change it.
func (m *Memo) RecordCluster(gcsAddr string, c Cluster) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.clusters == nil {
		m.clusters = map[string]Cluster{}
	}
	m.clusters[gcsAddr] = c
}

// Cluster is the last plan recorded for gcsAddr; false when no plan of a
// cluster at exactly that address (IP and port) ran in this process.
func (m *Memo) Cluster(gcsAddr string) (Cluster, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.clusters[gcsAddr]
	return c, ok
}

// NoteRunning records that a resource's cluster runs on head (its SSH
// host) at gcsPort, as a plan with its prior state found it. Terraform
// plans a replacement in two calls, the second without the prior state:
// there, a GCS port held by a cluster noted here is the cluster being
// replaced, which the apply destroys before it creates the new one.
func (m *Memo) NoteRunning(head string, gcsPort int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running == nil {
		m.running = map[string]bool{}
	}
	m.running[runningKey(head, gcsPort)] = true
}

// Running reports whether NoteRunning recorded a cluster on head at
// gcsPort in this run.
func (m *Memo) Running(head string, gcsPort int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running[runningKey(head, gcsPort)]
}

// runningKey joins host and port as an address does, so an IPv6 host and
// a port cannot be read as another host and port.
func runningKey(head string, gcsPort int) string {
	return net.JoinHostPort(head, strconv.Itoa(gcsPort))
}

// PutModel records that dir on the node reached at host will hold files
// (by name and size) once the apply ran: a deployment planned in the same
// run checks its weights rule (D20) against this instead of the node,
// which may not hold them yet.
func (m *Memo) PutModel(host, dir string, files map[string]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.models == nil {
		m.models = map[dirOn]map[string]int64{}
	}
	m.models[dirOn{host, dir}] = files
}

// Model is what a model plan put in dir on host; ok false when none did
// (or there is no memo).
func (m *Memo) Model(host, dir string) (files map[string]int64, ok bool) {
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	files, ok = m.models[dirOn{host, dir}]
	return files, ok
}
