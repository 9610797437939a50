// Package raycluster stands a Ray cluster up on nodes reached over SSH and
// reads it back: facts and predictions for the plan, locks, start, stop,
// the apply of a whole cluster with its rollback, and the registered node
// table. It knows nothing of Terraform; the resources in internal/resources
// (directly, and through internal/vllmdeploy) turn its results into state
// and diagnostics. Findings and failures come back as finding.Finding
// values, each naming the attribute it is about.
//
// One file per job, so each can be read alone: raycluster.go holds the
// planned cluster (Spec) and the Manager every operation goes through;
// table.go Ray's node table; plan.go the plan-time reads and evaluate.go the pure
// rules run on them; lock.go node locks and start markers; lifecycle.go
// start, stop and registration of a node; create.go, update.go and
// destroy.go a whole cluster's apply (Create, Reconcile, Destroy), each in
// its order and with its rollback; token.go the auth token; import.go how
// an import finds a running cluster (Discover).
package raycluster

import (
	"context"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// HeadName names the head among nodes; workers go by their map key.
const HeadName = "head"

// NodeSpec is one planned node.
type NodeSpec struct {
	Name      string
	Path      finding.Path // the node object's attribute, for findings
	Endpoint  transport.Endpoint
	NodeIP    string
	NumGPUs   *int64
	Resources map[string]float64
	Labels    map[string]string
	// Interface is the node's own fabric port: its Ray gets it as
	// NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME ("" leaves them to env).
	Interface string
}

// Spec is the whole planned cluster.
type Spec struct {
	Head          NodeSpec
	Workers       map[string]NodeSpec
	Runtime       nodeexec.Runtime
	GCSPort       int
	Env           map[string]string
	SecretEnv     map[string]string // write-only: from the configuration, never in state
	StartArgs     []string
	DashboardHost string
	// AuthToken: Ray's token authentication (RAY_AUTH_MODE=token), with one
	// token in a 0600 file at Ray's default path on every node.
	AuthToken bool
}

// WorkerNames are the worker keys, sorted.
func (s Spec) WorkerNames() []string {
	names := make([]string, 0, len(s.Workers))
	for k := range s.Workers {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// GCSAddr is the address of the cluster's GCS when the head registered
// headIP: what workers join and what every stop and node-table read names.
func (s Spec) GCSAddr(headIP string) string {
	return net.JoinHostPort(headIP, strconv.Itoa(s.GCSPort))
}

// endpoints are the SSH endpoints of every node of the specs, heads first:
// the nodes an operation locks.
func endpoints(specs ...Spec) []transport.Endpoint {
	var out []transport.Endpoint
	for _, s := range specs {
		out = append(out, s.Head.Endpoint)
		for _, name := range s.WorkerNames() {
			out = append(out, s.Workers[name].Endpoint)
		}
	}
	return out
}

// Endpoints are the nodes' SSH endpoints by node name.
func (s Spec) Endpoints() map[string]transport.Endpoint {
	out := map[string]transport.Endpoint{HeadName: s.Head.Endpoint}
	for name, w := range s.Workers {
		out[name] = w.Endpoint
	}
	return out
}

// Manager runs cluster operations through a shared SSH pool. The provider
// makes one per process, shared by every resource and data source.
type Manager struct {
	Pool *transport.Pool

	mu        sync.Mutex          // guards snapshots and tokens
	snapshots map[string]snapshot // head SSH host|GCS address -> node table read moments ago (table.go)
	tokens    map[string]string   // tokenKey -> Ray's auth token as the head holds it (table.go)
}

// NewManager is the provider-wide cluster manager.
func NewManager(pool *transport.Pool) *Manager {
	return &Manager{Pool: pool, snapshots: map[string]snapshot{}}
}

func (m *Manager) run(ctx context.Context, e transport.Endpoint, step string, argv []string) (*transport.Result, error) {
	return m.Pool.Run(ctx, e, transport.Cmd{Step: step, Argv: argv})
}

func (m *Manager) runStdin(ctx context.Context, e transport.Endpoint, step string, argv []string, stdin []byte) error {
	_, err := m.Pool.Run(ctx, e, transport.Cmd{Step: step, Argv: argv, Stdin: stdin})
	return err
}

// failed is one error about the attribute at attr (nil: the resource as a
// whole), as the apply reports it: the summary the user reads and the
// error as its detail.
func failed(attr finding.Path, summary string, err error) finding.Finding {
	return finding.Finding{Path: attr, Summary: summary, Detail: err.Error()}
}

// warning is failed's counterpart for what went wrong but fails nothing.
func warning(attr finding.Path, summary, detail string) finding.Finding {
	return finding.Finding{Warning: true, Path: attr, Summary: summary, Detail: detail}
}

// hasError reports whether any diagnostic is an error, not a warning.
func hasError(ds []finding.Finding) bool {
	return slices.ContainsFunc(ds, func(d finding.Finding) bool { return !d.Warning })
}
