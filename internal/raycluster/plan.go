// Plan-time reads: every node's facts, over SSH, workers in parallel with
// the head where they can be, handed to Evaluate (evaluate.go) for the
// rules. This is the I/O half of the plan; the rules themselves are pure.

package raycluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// facts reads one node's facts through the runtime, in one round trip;
// peers are more addresses whose routes to read there.
func (m *Manager) facts(ctx context.Context, s Spec, n NodeSpec, routeTo, listenPort, tcp string, peers ...string) (nodefacts.Facts, error) {
	args := []string{s.Runtime.Ray(), "", routeTo, listenPort, tcp}
	if len(peers) > 0 {
		args = append(args, "", "", "", strings.Join(peers, " "))
	}
	argv := s.Runtime.ProbeArgv(transport.Script(nodefacts.Script, args...))
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
	Diagnostics []finding.Finding
	// StopOrphan: the head's GCS port is held by the Ray of a create that
	// never finished; the create stops it before it starts the head.
	StopOrphan bool
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
	hf, err := m.facts(ctx, s, s.Head, "", listen, "", knownWorkerIPs(s, o)...)
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

// knownWorkerIPs are the workers' addresses known before any node is read
// (what a running worker registered, else its node_ip): the head's routes
// to them are read with its facts, in the same round trip. A worker whose
// address Ray detects is reached over the network it routes to the head
// on, the head's own.
func knownWorkerIPs(s Spec, o PlanOptions) []string {
	var ips []string
	for _, name := range s.WorkerNames() {
		ip := o.Known[name]
		if ip == "" {
			ip = s.Workers[name].NodeIP
		}
		if a, err := netip.ParseAddr(ip); err == nil && a.Is4() && !slices.Contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	return ips
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
