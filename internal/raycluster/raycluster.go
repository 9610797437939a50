// Package raycluster stands a Ray cluster up on nodes reached over SSH and
// reads it back: facts and predictions for the plan, locks, start, stop,
// and the registered node table. It knows nothing of Terraform; the
// resource in internal/resources turns its results into state and
// diagnostics.
package raycluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/runtime"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// HeadName names the head among nodes; workers go by their map key.
const HeadName = "head"

// NodeSpec is one planned node.
type NodeSpec struct {
	Name      string
	Path      []string // attribute path, for diagnostics
	Endpoint  transport.Endpoint
	NodeIP    string
	NumGPUs   *int64
	Resources map[string]float64
	Labels    map[string]string
}

// Spec is the whole planned cluster.
type Spec struct {
	Head          NodeSpec
	Workers       map[string]NodeSpec
	Runtime       runtime.Runtime
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

	mu        sync.Mutex
	snapshots map[string]snapshot // GCS address -> node table read during this plan
	planned   map[string]Planned  // GCS address -> what a cluster's plan concluded in this run
	running   map[string]bool     // head SSH host:GCS port -> a resource's cluster runs there (NoteRunning)
}

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

type snapshot struct {
	table ray.Table
	at    time.Time
}

// snapshotTTL bounds how long a node table read serves later readers: one
// plan reads it for the cluster's refresh and again for every deployment
// on it; a few seconds covers a plan, and anything this process starts or
// stops drops the snapshots at once.
const snapshotTTL = 10 * time.Second

// NewManager is the provider-wide cluster manager.
func NewManager(pool *transport.Pool) *Manager {
	return &Manager{Pool: pool, snapshots: map[string]snapshot{}}
}

// Snapshot is Table for readers that only look (refresh, plan, data
// sources): a table read moments ago in this process is reused.
func (m *Manager) Snapshot(ctx context.Context, s Spec, gcsAddr string) (ray.Table, error) {
	key := s.Head.Endpoint.Host + "|" + gcsAddr
	m.mu.Lock()
	if c, ok := m.snapshots[key]; ok && time.Since(c.at) < snapshotTTL {
		m.mu.Unlock()
		return c.table, nil
	}
	m.mu.Unlock()
	t, err := m.Table(ctx, s, gcsAddr)
	if err == nil {
		m.mu.Lock()
		if m.snapshots == nil {
			m.snapshots = map[string]snapshot{}
		}
		m.snapshots[key] = snapshot{table: t, at: time.Now()}
		m.mu.Unlock()
	}
	return t, err
}

// forget drops every snapshot: something was started or stopped.
func (m *Manager) forget() {
	m.mu.Lock()
	m.snapshots = map[string]snapshot{}
	m.mu.Unlock()
}

func (m *Manager) run(ctx context.Context, e transport.Endpoint, step string, argv []string) (*transport.Result, error) {
	c, err := m.Pool.Get(ctx, e)
	if err != nil {
		return nil, err
	}
	return c.Run(ctx, transport.Cmd{Step: step, Argv: argv})
}

// facts reads one node's facts through the runtime, in one round trip.
func (m *Manager) facts(ctx context.Context, s Spec, n NodeSpec, routeTo, listenPort, tcp string) (nodefacts.Facts, error) {
	argv := s.Runtime.ProbeArgv(transport.Script(nodefacts.Script, s.Runtime.Ray(), "", routeTo, listenPort, tcp))
	res, err := m.run(ctx, n.Endpoint, "read node facts", argv)
	if err != nil {
		return nodefacts.Facts{}, err
	}
	f, err := nodefacts.Parse(string(res.Stdout))
	if err != nil {
		return f, fmt.Errorf("%s: %w", n.Endpoint.Host, err)
	}
	return f, nil
}

// Plan is what the plan needs: every node's predicted registered IP, and
// the findings of the preflight rules.
type Plan struct {
	HeadIP      string
	Registered  map[string]string // node name -> IP Ray will register
	Hostnames   map[string]string // node name -> kernel hostname (Ray's NodeManagerHostname)
	RayVersion  string
	GPUs        *preflight.PlannedGPUs  // what the nodes will register; nil when not knowable before Ray starts
	Nodes       []preflight.ClusterNode // every node (head first) with its facts; nil when the head's address is unknown
	Diagnostics []preflight.Diagnostic
	// StopOrphan: the head's GCS port is held by the Ray of a create that
	// never finished; the create stops it before it starts the head.
	StopOrphan bool
}

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

// PlanOptions say what is already running, which changes the checks.
type PlanOptions struct {
	HeadRunning bool              // the head is ours and up: its GCS port is expected to be held, workers can probe it
	Known       map[string]string // nodes already registered (name -> IP): their IP is fact, not prediction
	// Replacing: this resource's own cluster holds the head's GCS port and
	// the plan replaces it, which stops it before starting the new one.
	Replacing bool
	// StartedBy is the start marker of a create on this head and GCS port
	// that never finished ("" none): its Ray, if it holds the port, is an
	// orphan the apply replaces. PlanCluster reads it.
	StartedBy string
}

// PlanCluster reads every node (one SSH command each, workers in parallel,
// and beside the head when its address is known without it) and runs the
// preflight rules on what it found.
func (m *Manager) PlanCluster(ctx context.Context, s Spec, o PlanOptions) (*Plan, error) {
	listen := ""
	if !o.HeadRunning && !o.Replacing {
		listen = strconv.Itoa(s.GCSPort)
	}
	// Workers are read with the route to the head's address. When that
	// address does not depend on the head's facts (node_ip, or what the
	// head registered), they are read while the head is: one round trip
	// of latency for the whole cluster instead of two.
	early := o.Known[HeadName]
	if early == "" {
		early = s.Head.NodeIP
	}
	var pending func() ([]nodefacts.Facts, error)
	if early != "" {
		pending = m.readWorkers(ctx, s, o, early)
	}
	drain := func() {
		if pending != nil {
			_, _ = pending() // never leave reads running past the plan
		}
	}
	hf, err := m.facts(ctx, s, s.Head, "", listen, "")
	if err == nil && len(hf.Listeners) > 0 {
		// Only when the port is held (a second round trip, rarely).
		o.StartedBy, err = m.StartedBy(ctx, s)
	}
	if err != nil {
		drain()
		return nil, err
	}
	headIP := headAddress(s, o, hf)
	if headIP == "" {
		drain()
		return Evaluate(s, o, hf, nil), nil
	}
	if pending == nil || headIP != early {
		drain()
		pending = m.readWorkers(ctx, s, o, headIP)
	}
	facts, err := pending()
	if err != nil {
		return nil, err
	}
	names := s.WorkerNames()
	workers := make(map[string]nodefacts.Facts, len(names))
	for i, name := range names {
		workers[name] = facts[i]
	}
	return Evaluate(s, o, hf, workers), nil
}

// readWorkers starts reading every worker's facts, in parallel, with the
// route to headIP; the function it returns waits for them.
func (m *Manager) readWorkers(ctx context.Context, s Spec, o PlanOptions, headIP string) func() ([]nodefacts.Facts, error) {
	names := s.WorkerNames()
	facts := make([]nodefacts.Facts, len(names))
	errs := make([]error, len(names))
	tcp := ""
	if o.HeadRunning {
		tcp = net.JoinHostPort(headIP, strconv.Itoa(s.GCSPort))
	}
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			facts[i], errs[i] = m.facts(ctx, s, s.Workers[name], headIP, "", tcp)
		})
	}
	return func() ([]nodefacts.Facts, error) {
		wg.Wait()
		return facts, errors.Join(errs...)
	}
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
func addressBound(n preflight.Node, o PlanOptions) []preflight.Diagnostic {
	if registered, running := o.Known[n.Name]; running {
		if gone := preflight.RegisteredAddressGone(n, registered); gone != nil {
			return gone
		}
	}
	return preflight.NodeIPBound(n)
}

// LockScript holds an flock on the node for as long as the provider keeps
// the session open; a crashed provider drops the connection and the lock.
// One lock file serializes every SSH user's applies on the node. Whoever
// comes first creates it (0644); flock needs only a read descriptor, and
// the others open it read-only: /tmp is sticky and, with
// fs.protected_regular, opening another user's file there for writing
// (O_CREAT) is refused even to a writable mode. The holder leaves a note in
// a file of its own ($lock.holder.<uid>) naming its process (pid and start
// time); a refused operation shows a note only when the kernel agrees: the
// file belongs to that uid, and that process is alive and is that uid's.
const LockScript = `lock="${TMPDIR:-/tmp}/terraform-provider-spark.lock"
[ -e "$lock" ] || ( umask 022; : >>"$lock" ) 2>/dev/null
if ! exec 9<"$lock"; then
  echo "cannot open the node lock $lock: $(ls -ln "$lock" 2>&1). It must be readable by every user of the node (0644); its owner can fix it, or root can remove it" >&2
  exit 74
fi
started() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
if ! flock -n 9; then
  who="a process that left no note the kernel confirms"
  for note in "$lock".holder.*; do
    [ -f "$note" ] || continue
    uid=${note##*.}
    [ "$(stat -c %u "$note")" = "$uid" ] || continue
    set -- $(head -n 1 "$note")
    [ "${1:-}" = pid ] && [ -d "/proc/${2:-x}" ] && [ "$(stat -c %u "/proc/$2")" = "$uid" ] && [ "$(started "$2")" = "${3:-}" ] || continue
    who="process $2 of user $(stat -c %U "/proc/$2") (uid $uid), which says: $(sed -n 2p "$note" | head -c 300)"
  done
  echo "another terraform-provider-spark operation holds the lock on this node: $who" >&2
  exit 73
fi
note="$lock.holder.$(id -u)"
printf 'pid %s %s\n%s\n' "$$" "$(started $$)" "$1" > "$note" 2>/dev/null || true
echo locked
cat >/dev/null
rm -f "$note"`

// Holder describes this provider process, for whoever finds the lock held.
func Holder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("terraform-provider-spark pid %d on %s since %s", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
}

// The start marker says a create is starting Ray on the head for a GCS port:
// written (on the host, in the SSH user's private directory) before the
// head's ray start, removed once the create has finished or rolled back. A
// marker found beside a Ray holding that port is an orphan of a create that
// was killed before it could roll back, so no state knows it; without the
// marker the same Ray is someone else's and the plan refuses to touch it.
// MarkStarting writes the start marker for the head's GCS port.
func (m *Manager) MarkStarting(ctx context.Context, s Spec, holder string) error {
	_, err := m.run(ctx, s.Head.Endpoint, "write the start marker", transport.Script(transport.PrivateDir+`private_dir
printf '%s\n' "$2" > "$private/ray-$1.starting"`, strconv.Itoa(s.GCSPort), holder))
	return err
}

// ClearStarting removes the start marker.
func (m *Manager) ClearStarting(ctx context.Context, s Spec) error {
	_, err := m.run(ctx, s.Head.Endpoint, "remove the start marker",
		transport.Script(transport.PrivateDir+`owned && rm -f -- "$private/ray-$1.starting"; true`, strconv.Itoa(s.GCSPort)))
	return err
}

// StartedBy reads the start marker ("" when there is none, or when the
// directory is not the SSH user's own: a marker anyone could have written
// proves nothing).
func (m *Manager) StartedBy(ctx context.Context, s Spec) (string, error) {
	res, err := m.run(ctx, s.Head.Endpoint, "read the start marker",
		transport.Script(transport.PrivateDir+`owned && cat -- "$private/ray-$1.starting" 2>/dev/null; true`, strconv.Itoa(s.GCSPort)))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// Lock takes the node lock on every endpoint (in a fixed order, so two
// operations never wait on each other) and returns the release. It fails
// fast when another operation holds a lock, naming the holder.
func (m *Manager) Lock(ctx context.Context, holder string, endpoints ...transport.Endpoint) (func(), error) {
	sort.Slice(endpoints, func(i, j int) bool {
		if endpoints[i].Host != endpoints[j].Host {
			return endpoints[i].Host < endpoints[j].Host
		}
		return endpoints[i].Port < endpoints[j].Port
	})
	var held []*transport.Held
	release := func() {
		for _, h := range held {
			h.Release()
		}
	}
	// One lock per node: nodes are told apart by address and SSH port (two
	// boxes behind one address are reached on two ports).
	seen := map[string]bool{}
	for _, e := range endpoints {
		port := e.Port
		if port == 0 {
			port = transport.DefaultPort
		}
		key := net.JoinHostPort(e.Host, strconv.Itoa(port))
		if seen[key] {
			continue
		}
		seen[key] = true
		c, err := m.Pool.Get(ctx, e)
		if err != nil {
			release()
			return nil, err
		}
		h, err := c.Hold(ctx, transport.Cmd{Step: "lock node", Argv: transport.Script(LockScript, holder)}, "locked")
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, h)
	}
	return release, nil
}

// Table reads Ray's node table through the head.
func (m *Manager) Table(ctx context.Context, s Spec, gcsAddr string) (ray.Table, error) {
	read := []string{"sh", "-c", ray.AuthEnv + `
ray=$1; shift
` + ray.PythonOfRay + `
exec "$py" -c "$@"`, "sh", s.Runtime.Ray(), ray.NodesScript, gcsAddr}
	argv := read
	if c := s.Runtime.Container; c != nil {
		argv = s.Runtime.WrapIfRunning(read, ray.NotRunningLine(c.Name))
	}
	res, err := m.run(ctx, s.Head.Endpoint, "read Ray node table", argv)
	if err != nil {
		return ray.Table{}, err
	}
	return ray.ParseNodes(string(res.Stdout))
}

// EnsureRuntime starts the node's container when the runtime has one.
func (m *Manager) EnsureRuntime(ctx context.Context, s Spec, n NodeSpec) error {
	if argv := s.Runtime.EnsureArgv(); argv != nil {
		_, err := m.run(ctx, n.Endpoint, "start runtime container", argv)
		return err
	}
	return nil
}

// Start runs `ray start` for one node. Processes are started in their own
// session with no terminal, so they outlive the SSH session. registeredIP
// is the address Ray registers for the node (planned): it becomes the
// node's VLLM_HOST_IP, which vLLM's worker actors read from the raylet's
// environment.
//
// With token authentication the head keeps the token it already has at
// Ray's default path (or gets a new random one) and a worker gets token,
// read from the head: on stdin, never in argv, never in state.
func (m *Manager) Start(ctx context.Context, s Spec, n NodeSpec, headIP, registeredIP, token string) error {
	m.forget()
	if err := m.EnsureRuntime(ctx, s, n); err != nil {
		return err
	}
	if s.AuthToken {
		var err error
		if n.Name == HeadName {
			err = m.ensureToken(ctx, s, n)
		} else {
			err = m.putToken(ctx, s, n, token)
		}
		if err != nil {
			return err
		}
	}
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = v
	}
	for k, v := range s.SecretEnv {
		env[k] = v
	}
	if s.AuthToken {
		env["RAY_AUTH_MODE"] = "token"
	}
	if _, given := env["VLLM_HOST_IP"]; !given && registeredIP != "" {
		env["VLLM_HOST_IP"] = registeredIP
	}
	o := ray.StartOptions{RayCommand: s.Runtime.Ray(), NodeIP: n.NodeIP, NumGPUs: n.NumGPUs, Resources: n.Resources,
		Labels: n.Labels, Env: env, ExtraArgs: s.StartArgs}
	step := "start Ray worker " + n.Name
	if n.Name == HeadName {
		o.Head, o.GCSPort, o.DashboardHost = true, s.GCSPort, s.DashboardHost
		step = "start Ray head"
	} else {
		o.HeadAddress = net.JoinHostPort(headIP, strconv.Itoa(s.GCSPort))
	}
	argv, envFile, err := ray.StartCommand(o)
	if err != nil {
		return err
	}
	c, err := m.Pool.Get(ctx, n.Endpoint)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err = c.Run(ctx, transport.Cmd{Step: step, Argv: s.Runtime.Wrap(append([]string{"setsid", "-w"}, argv...), true), Stdin: envFile}); err != nil {
		return err
	}
	tflog.Info(ctx, "Ray started", map[string]any{"node": n.Name, "host": n.Endpoint.Host, "duration_ms": time.Since(start).Milliseconds()})
	return nil
}

// Stop stops this cluster's Ray on one node (gcsAddr: the head's registered
// IP and GCS port), and only it: another cluster's Ray on the node, or
// another user's, keeps running (ray.StopArgv). In a container this
// provider created, the container goes with it.
func (m *Manager) Stop(ctx context.Context, s Spec, n NodeSpec, gcsAddr string) error {
	m.forget()
	stop := ray.StopArgv(gcsAddr, s.GCSPort, n.Name == HeadName)
	if _, err := m.run(ctx, n.Endpoint, "stop Ray on "+n.Name, s.Runtime.StopArgv(stop)); err != nil {
		return err
	}
	tflog.Info(ctx, "Ray stopped", map[string]any{"node": n.Name, "host": n.Endpoint.Host})
	return nil
}

// RegistrationError says Ray registered a node under another address than
// the plan predicted, or not at all.
type RegistrationError struct {
	Node, Want string
	Got        []string
	Waited     time.Duration
}

func (e *RegistrationError) Error() string {
	if len(e.Got) == 0 {
		return fmt.Sprintf("Ray did not register %s as %s within %s", e.Node, e.Want, e.Waited.Round(time.Second))
	}
	return fmt.Sprintf("Ray registered %s as %s, not %s as planned: the node's address detection disagreed with the "+
		"prediction. Set node_ip on %s to the address you want Ray to use", e.Node, strings.Join(e.Got, ", "), e.Want, e.Node)
}

// WaitRegistered polls the node table until every wanted node (name -> IP)
// is alive under its IP. A node whose hostname shows up alive under
// another IP fails at once.
func (m *Manager) WaitRegistered(ctx context.Context, s Spec, gcsAddr string, want map[string]string, hostnames map[string]string) (ray.Table, error) {
	start := time.Now()
	var last ray.Table
	var lastErr error
	for {
		t, err := m.Table(ctx, s, gcsAddr)
		if err == nil && t.GCSUp {
			last = t
			missing := ""
			for name, ip := range want {
				if _, ok := t.Alive(ip); ok {
					continue
				}
				missing = name
				for _, n := range t.Nodes {
					if n.Alive && hostnames[name] != "" && n.Hostname == hostnames[name] && n.IP != ip {
						return t, &RegistrationError{Node: name, Want: ip, Got: []string{n.IP}}
					}
				}
			}
			if missing == "" {
				for _, name := range slices.Sorted(maps.Keys(want)) {
					tflog.Info(ctx, "Ray node registered", map[string]any{"node": name, "ip": want[name], "waited_ms": time.Since(start).Milliseconds()})
				}
				return t, nil
			}
			lastErr = &RegistrationError{Node: missing, Want: want[missing], Waited: time.Since(start)}
		} else if err != nil {
			lastErr = err
		} else {
			lastErr = fmt.Errorf("the head's GCS at %s does not answer: %s", gcsAddr, t.GCSError)
		}
		select {
		case <-ctx.Done():
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return last, fmt.Errorf("%w (gave up: %w)", lastErr, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func addrs(f nodefacts.Facts) []string {
	var out []string
	for _, i := range f.Interfaces {
		for _, a := range i.Addresses {
			out = append(out, a.Addr().String())
		}
	}
	return out
}

// CurrentCluster reads the GCS address the head's Ray recorded
// (<temp dir>/ray/ray_current_cluster): how an import finds the cluster.
func (m *Manager) CurrentCluster(ctx context.Context, s Spec) (string, error) {
	res, err := m.run(ctx, s.Head.Endpoint, "find the running Ray cluster",
		s.Runtime.Wrap([]string{"sh", "-c", `cat "${TMPDIR:-/tmp}/ray/ray_current_cluster"`}, false))
	if err != nil {
		return "", fmt.Errorf("no Ray cluster found on the head (%w): start one, or create it with this resource", err)
	}
	addr := strings.TrimSpace(string(res.Stdout))
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("ray_current_cluster on the head holds %q, not ip:port", addr)
	}
	return addr, nil
}

// NodeAddresses lists a node's addresses (to match a node reached by SSH
// with a row of Ray's node table).
func (m *Manager) NodeAddresses(ctx context.Context, s Spec, n NodeSpec) ([]string, error) {
	f, err := m.facts(ctx, s, n, "", "", "")
	if err != nil {
		return nil, err
	}
	return addrs(f), nil
}

// tokenScript writes stdin to Ray's default token path (0600) unless $1 is
// "keep" and a token is already there. A token it writes gets a mark beside
// it: the provider's own, which a destroy removes (RemoveTokenScript); one
// it found and kept is the user's.
const tokenScript = `f="$HOME/.ray/auth_token"
if [ "$1" = keep ] && [ -s "$f" ]; then cat > /dev/null; exit 0; fi
mkdir -p "$HOME/.ray" && chmod 700 "$HOME/.ray" && umask 077 &&
cat > "$f.tmp" && chmod 600 "$f.tmp" && mv -f "$f.tmp" "$f" && : > "$f.terraform-provider-spark"`

// RemoveTokenScript removes the token the provider wrote, once no Ray of
// this user runs on the node any more (another cluster of the user's would
// need it): a secret file does not outlive its cluster.
const RemoveTokenScript = `f="$HOME/.ray/auth_token"
[ -e "$f.terraform-provider-spark" ] || exit 0
u=$(id -u)
if pgrep -u "$u" -x raylet >/dev/null || pgrep -u "$u" -x gcs_server >/dev/null; then exit 0; fi
rm -f -- "$f" "$f.terraform-provider-spark"`

// RemoveToken runs RemoveTokenScript on a node, where Ray runs.
func (m *Manager) RemoveToken(ctx context.Context, s Spec, n NodeSpec) error {
	_, err := m.run(ctx, n.Endpoint, "remove Ray auth token on "+n.Name, s.Runtime.Wrap([]string{"sh", "-c", RemoveTokenScript}, false))
	return err
}

func (m *Manager) ensureToken(ctx context.Context, s Spec, n NodeSpec) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	return m.runStdin(ctx, n.Endpoint, "write Ray auth token", s.Runtime.Wrap(transport.Script(tokenScript, "keep"), true), []byte(hex.EncodeToString(b)))
}

func (m *Manager) putToken(ctx context.Context, s Spec, n NodeSpec, token string) error {
	if token == "" {
		return fmt.Errorf("no Ray auth token read from the head for %s", n.Name)
	}
	return m.runStdin(ctx, n.Endpoint, "write Ray auth token on "+n.Name, s.Runtime.Wrap(transport.Script(tokenScript, "replace"), true), []byte(token))
}

// ReadToken reads the cluster's token from the head ("" when it has none).
// It stays in memory, on its way to a worker.
func (m *Manager) ReadToken(ctx context.Context, s Spec) (string, error) {
	res, err := m.run(ctx, s.Head.Endpoint, "read Ray auth token",
		s.Runtime.Wrap([]string{"sh", "-c", `cat "$HOME/.ray/auth_token" 2>/dev/null || true`}, false))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

func (m *Manager) runStdin(ctx context.Context, e transport.Endpoint, step string, argv []string, stdin []byte) error {
	c, err := m.Pool.Get(ctx, e)
	if err != nil {
		return err
	}
	_, err = c.Run(ctx, transport.Cmd{Step: step, Argv: argv, Stdin: stdin})
	return err
}
