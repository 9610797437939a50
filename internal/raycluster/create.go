// A cluster's create: the plan's checks again (every value is known now),
// the node locks, the head, then the workers, each waited for until Ray
// registered it as planned. A create that fails leaves nothing started.

package raycluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// Create starts the cluster s on its nodes and returns Ray's node table
// once every node registered under the address the plan predicted, with
// what it found on the way: the plan's findings (warnings, or the errors
// that stopped it before anything started) and the apply's own warnings
// and errors, each on the attribute it is about. On any error, what this
// create started is stopped again (rollback), and the table is empty.
func (m *Manager) Create(ctx context.Context, s Spec) (ray.Table, []finding.Finding) {
	// The same checks as the plan, now with every value known, before anything starts.
	p, err := m.PlanCluster(ctx, s, PlanOptions{})
	if err != nil {
		return ray.Table{}, []finding.Finding{failed(nil, "Cannot read the nodes", err)}
	}
	found := p.Diagnostics
	if hasError(found) {
		return ray.Table{}, found
	}
	holder := Holder()
	release, err := m.Lock(ctx, holder, endpoints(s)...)
	if err != nil {
		return ray.Table{}, append(found, failed(nil, "Cannot lock the nodes", err))
	}
	defer release()
	c := &creation{m: m, s: s, plan: p, gcsAddr: s.GCSAddr(p.HeadIP), found: found}
	if !c.claimHead(ctx, holder) {
		return ray.Table{}, c.found
	}
	t, ok := c.start(ctx)
	if !ok {
		return ray.Table{}, c.found
	}
	if err := m.ClearStarting(ctx, s); err != nil {
		c.found = append(c.found, warning(nil, "Cannot remove the start marker",
			fmt.Sprintf("%v\n\nThe cluster is created. A later plan that finds this cluster's Ray without state would take it for an "+
				"unfinished create's and replace it.", err)))
	}
	return t, c.found
}

// creation is one create under way: what it started, so that a failure
// stops exactly that, and what it found so far.
type creation struct {
	m       *Manager
	s       Spec
	plan    *Plan
	gcsAddr string
	started []NodeSpec
	found   []finding.Finding
}

// fail records an error; with rollback, after stopping what was started.
func (c *creation) fail(ctx context.Context, rollback bool, errs ...finding.Finding) {
	if rollback {
		c.rollback(ctx)
	}
	c.found = append(c.found, errs...)
}

// claimHead makes the head's GCS port this create's: it stops the Ray an
// unfinished create left there (the plan found it beside its start marker)
// and writes this create's start marker. The marker lives until this
// create has finished or rolled back: if this provider is killed first,
// the next plan knows the Ray it finds.
func (c *creation) claimHead(ctx context.Context, holder string) bool {
	if c.plan.StopOrphan {
		// A create of this cluster was killed before it could roll back:
		// its Ray holds the port (the plan said so); replace it.
		if err := c.m.Stop(ctx, c.s, c.s.Head, c.gcsAddr); err != nil {
			c.fail(ctx, false, failed(c.s.Head.Path, "Cannot stop the Ray an unfinished create left", err))
			return false
		}
	}
	if err := c.m.MarkStarting(ctx, c.s, holder); err != nil {
		c.fail(ctx, false, failed(c.s.Head.Path, "Cannot write the start marker", err))
		return false
	}
	return true
}

// start starts the cluster and waits until every node registered: the
// node table then, and true. The workers do not wait for the head's ray
// start to return (it goes on to start Ray's dashboard, agents and raylet):
// each is stopped clean, gets its container and the head's token
// meanwhile, and runs its ray start as soon as the head's GCS accepts
// connections. A failure rolls back and returns false.
func (c *creation) start(ctx context.Context) (ray.Table, bool) {
	s, p := c.s, c.plan
	// A node counts as started from the moment anything is sent to start
	// it: an apply interrupted meanwhile (Ctrl-C cancels ctx) stops it too.
	c.started = []NodeSpec{s.Head}
	if err := c.m.prepare(ctx, s, s.Head, ""); err != nil {
		c.fail(ctx, true, failed(s.Head.Path, "Cannot start the Ray head", err))
		return ray.Table{}, false
	}
	token, err := c.m.clusterToken(ctx, s)
	if err != nil {
		c.fail(ctx, true, failed(finding.Attr("auth_mode"), "Cannot read the cluster's auth token", err))
		return ray.Table{}, false
	}
	want := map[string]string{HeadName: p.HeadIP}
	for _, name := range s.WorkerNames() {
		c.started = append(c.started, s.Workers[name])
	}
	workerErrs, headErr, headRegistered := c.startAll(ctx, token)
	switch {
	case headErr != nil:
		c.fail(ctx, true, failed(s.Head.Path, "Cannot start the Ray head", headErr))
		return ray.Table{}, false
	case headRegistered != nil:
		c.fail(ctx, true, failed(s.Head.Path, "Ray head did not register as planned", headRegistered))
		return ray.Table{}, false
	case len(workerErrs) > 0:
		c.fail(ctx, true, workerFailures(s, "Cannot start Ray worker", workerErrs)...)
		return ray.Table{}, false
	}
	for _, name := range s.WorkerNames() {
		want[name] = p.Registered[name]
	}
	t, err := c.m.WaitRegistered(ctx, s, c.gcsAddr, want, p.Hostnames, nil)
	if err != nil {
		c.fail(ctx, true, notRegistered(s, err))
		return ray.Table{}, false
	}
	return t, true
}

// startAll runs the head's ray start and, beside it, the workers' (each
// once the head's GCS accepts connections): the workers' errors by name,
// the head's error, and the head's registration error.
//
// Why the GCS listening is enough (Ray 2.52.1, python/ray/_private/node.py):
// a worker's ray start needs only the GCS, no other head process. Its Node
// connects a GcsClient (_init_gcs_client) and reads the session name from
// the GCS's KV store (internal_kv_get_with_retry), which the head writes in
// start_head_processes right after its GCS starts, before it starts the
// monitor, the dashboard and its own raylet. A worker's Python spends most
// of a second importing Ray before it asks; should it still come too early,
// Ray retries both reads (NUM_REDIS_GET_RETRIES, 20), at 1 and 2 seconds.
func (c *creation) startAll(ctx context.Context, token string) (workerErrs map[string]error, headErr, headRegistered error) {
	s, p := c.s, c.plan
	// A head that fails to start cancels the workers' wait for its GCS.
	headCtx, headFailed := context.WithCancel(ctx)
	defer headFailed()
	headDone := make(chan struct{})
	go func() {
		defer close(headDone)
		if headErr = c.m.startRay(ctx, s, s.Head, "", p.HeadIP); headErr != nil {
			headFailed()
		}
	}()
	var once sync.Once
	var gcsErr error
	listening := func() error {
		once.Do(func() { gcsErr = c.m.waitGCSListening(headCtx, s, c.gcsAddr) })
		return gcsErr
	}
	workerErrs = c.m.startWorkers(ctx, s, s.WorkerNames(), p.HeadIP, p.Registered, token, true, listening)
	<-headDone
	if headErr == nil {
		_, headRegistered = c.m.WaitRegistered(ctx, s, c.gcsAddr, map[string]string{HeadName: p.HeadIP}, p.Hostnames, nil)
	}
	return workerErrs, headErr, headRegistered
}

// notRegistered is the error of workers that did not register as planned:
// on the worker's attribute when Ray names one, else on the cluster.
func notRegistered(s Spec, err error) finding.Finding {
	var reg *RegistrationError
	var attr finding.Path
	if errors.As(err, &reg) && reg.Node != HeadName {
		attr = s.Workers[reg.Node].Path
	}
	return failed(attr, "Ray workers did not register as planned", err)
}

// rollback stops what this create started, workers first, even when the
// apply was cancelled (bounded, on a fresh context): nothing half-started.
// Once every node is stopped, the start marker and the auth tokens go too;
// a node that could not be stopped keeps the marker, a warning says why.
func (c *creation) rollback(ctx context.Context) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	stopped := true
	for i := len(c.started) - 1; i >= 0; i-- {
		n := c.started[i]
		if err := c.m.Stop(bg, c.s, n, c.gcsAddr); err != nil {
			stopped = false
			tflog.Warn(ctx, "rollback: could not stop Ray", map[string]any{"node": n.Name, "error": err.Error()})
			c.found = append(c.found, warning(nil, "Rollback could not stop Ray on "+n.Name,
				fmt.Sprintf("%v\n\nRay may still run on %s (%s). The start marker stays on the head, so the next apply "+
					"recognises what this one left and replaces it once the node answers.", err, n.Name, n.Endpoint.Host)))
		}
	}
	if !stopped {
		return
	}
	_ = c.m.ClearStarting(bg, c.s)
	for _, n := range c.started {
		c.found = append(c.found, c.m.removeToken(bg, c.s, n)...)
	}
}
