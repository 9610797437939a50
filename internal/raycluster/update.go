// A cluster's update in place: the head keeps running; the workers the
// resource decided to stop are stopped (and the removed ones must leave
// Ray's node table), the ones it decided to start join the head. An update
// that fails takes back the workers it started.

package raycluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// Update is an update of a running cluster as the resource decided it,
// comparing its plan with its state: which workers stop, which start.
type Update struct {
	Old Spec // the cluster as it runs (from state)
	New Spec // the cluster as planned
	// HeadIP is the address the head registered: an update keeps the
	// head, so workers join it there and the GCS is at Old.GCSAddr(HeadIP).
	HeadIP string
	// Stop are the workers of Old whose Ray stops (removed from New,
	// changed, or not alive), by name.
	Stop map[string]StopWorker
	// Start are the workers of New whose Ray starts (added, changed, or
	// not alive), in name order.
	Start []string
	// Want is every worker of New by name, with the IP Ray must register
	// for it (the plan's).
	Want map[string]string
}

// StopWorker is what stopping one worker's Ray takes besides the stop.
type StopWorker struct {
	// RegisteredIP is the IP Ray registered for the worker: once a worker
	// removed from the cluster is stopped, no alive node may have it.
	RegisteredIP string
	// RemoveToken: the auth token stays with the Ray it was for, not on a
	// node (or user) the worker left.
	RemoveToken bool
	// LeaveSession: Ray starts there again as another SSH user of the same
	// host, in the same session (LeaveSession).
	LeaveSession bool
	// NodeID is the Ray node the worker was: once stopped it does not
	// count as the worker registering again, even while the GCS still
	// lists it alive.
	NodeID string
}

// removed are the workers of Old that are not in New, in name order.
func (u Update) removed() []string {
	var out []string
	for _, name := range u.Old.WorkerNames() {
		if _, ok := u.New.Workers[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

// Reconcile applies u and returns Ray's node table once every worker of
// New registered as planned, with what it found: warnings, and the errors
// that failed the update, each on the attribute it is about. A removed
// worker that cannot be reached at all is left out with a warning. When
// starting or registering workers fails, the workers this update started
// are stopped again: the state keeps the cluster as it was, and a worker
// joined under this update's settings would be a Ray no state knows (the
// next plan starts it again).
func (m *Manager) Reconcile(ctx context.Context, u Update) (ray.Table, []finding.Finding) {
	var found []finding.Finding
	u.Old, found = m.dropUnreachable(ctx, u.Old, u.removed())
	release, err := m.Lock(ctx, Holder(), endpoints(u.New, u.Old)...)
	if err != nil {
		return ray.Table{}, append(found, failed(nil, "Cannot lock the nodes", err))
	}
	defer release()
	gcsAddr := u.Old.GCSAddr(u.HeadIP)
	stopped, d := m.stopChanged(ctx, u, gcsAddr)
	if found = append(found, d...); hasError(d) {
		return ray.Table{}, found
	}
	token, err := m.clusterToken(ctx, u.New)
	if err != nil {
		return ray.Table{}, append(found, failed(finding.Attr("auth_mode"), "Cannot read the cluster's auth token", err))
	}
	if errs := m.startWorkers(ctx, u.New, u.Start, u.HeadIP, u.Want, token, false, nil); len(errs) > 0 {
		found = append(found, workerFailures(u.New, "Cannot start Ray worker", errs)...)
		return ray.Table{}, append(found, m.takeBack(ctx, u, gcsAddr)...)
	}
	want := maps.Clone(u.Want)
	want[HeadName] = u.HeadIP
	stale := map[string]bool{}
	for _, w := range u.Stop {
		if w.NodeID != "" {
			stale[w.NodeID] = true
		}
	}
	t, err := m.WaitRegistered(ctx, u.New, gcsAddr, want, m.hostnames(ctx, u.New, u.Start), stale)
	if err != nil {
		found = append(found, failed(nil, "Ray workers did not register as planned", err))
		return ray.Table{}, append(found, m.takeBack(ctx, u, gcsAddr)...)
	}
	if d := removedStillAlive(t, u, stopped); d != nil {
		return ray.Table{}, append(found, *d)
	}
	return t, found
}

// stopChanged stops Ray on the workers u stops, and only there, in name
// order; a worker dropped as unreachable is skipped. It returns the
// workers it stopped and what it found; it stops at the first error.
func (m *Manager) stopChanged(ctx context.Context, u Update, gcsAddr string) ([]string, []finding.Finding) {
	var stopped []string
	var found []finding.Finding
	for _, name := range slices.Sorted(maps.Keys(u.Stop)) {
		w, reachable := u.Old.Workers[name]
		if !reachable {
			continue // removed, unreachable, warned about
		}
		if err := m.Stop(ctx, u.Old, w, gcsAddr); err != nil {
			return stopped, append(found, failed(w.Path, "Cannot stop Ray worker", err))
		}
		if u.Stop[name].RemoveToken {
			found = append(found, m.removeToken(ctx, u.Old, w)...)
		}
		if u.Stop[name].LeaveSession {
			if err := m.LeaveSession(ctx, u.Old, w); err != nil {
				return stopped, append(found, failed(w.Path, "Cannot hand the worker to another SSH user", err))
			}
		}
		stopped = append(stopped, name)
	}
	return stopped, found
}

// takeBack stops the workers a failed update started, and removes the auth
// token it wrote there: state keeps the cluster as it was, so no destroy
// would know a worker this update added (the next apply writes the token
// again). A worker it cannot stop is a warning on that worker.
func (m *Manager) takeBack(ctx context.Context, u Update, gcsAddr string) []finding.Finding {
	var found []finding.Finding
	ctx = context.WithoutCancel(ctx)
	for _, name := range u.Start {
		w := u.New.Workers[name]
		if err := m.Stop(ctx, u.New, w, gcsAddr); err != nil {
			found = append(found, warning(w.Path, "Cannot stop a worker this failed update started",
				err.Error()+"\n\nThe next apply stops and starts it again."))
			continue
		}
		found = append(found, m.removeToken(ctx, u.New, w)...)
	}
	return found
}

// removedStillAlive: a worker removed from the cluster and stopped must
// have left Ray's node table; the first (of stopped, in order) still alive
// there under the IP it registered is the error, nil when none is.
func removedStillAlive(t ray.Table, u Update, stopped []string) *finding.Finding {
	for _, name := range stopped {
		if _, still := u.New.Workers[name]; still {
			continue
		}
		if n, ok := t.Alive(u.Stop[name].RegisteredIP); ok {
			return &finding.Finding{Path: u.Old.Workers[name].Path, Summary: "Removed worker is still in the cluster",
				Detail: fmt.Sprintf("Ray on %s was stopped but node %s (%s) is still alive in the node table.", name, n.ID, n.IP)}
		}
	}
	return nil
}

// hostnames reads the kernel hostname where Ray runs (Ray's
// NodeManagerHostname) on the named workers, so that one registering
// under another address than planned fails the wait at once instead of
// after its timeout. Best effort: a worker whose hostname cannot be read is
// only found later.
func (m *Manager) hostnames(ctx context.Context, s Spec, names []string) map[string]string {
	out := map[string]string{}
	for _, name := range names {
		n := s.Workers[name]
		res, err := m.run(ctx, n.Endpoint, "read hostname on "+name, s.Runtime.Wrap([]string{"cat", "/proc/sys/kernel/hostname"}, false))
		if err == nil {
			out[name] = strings.TrimSpace(string(res.Stdout))
		}
	}
	return out
}
