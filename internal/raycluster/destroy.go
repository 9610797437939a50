// A cluster's destroy: workers first, in parallel, then the head, then the
// auth tokens the provider wrote; and dropUnreachable, which keeps a node
// that is gone from holding a destroy (or a worker's removal) hostage.

package raycluster

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Destroy stops the cluster's Ray on every node (gcsAddr: the head's
// registered IP and GCS port), workers before the head, and removes the
// auth tokens the provider wrote. A worker that cannot be reached at all
// is left out with a warning; any other failure to stop is an error, and
// the head keeps running while a worker could not be stopped. It returns
// what it found: warnings, and the errors that failed the destroy.
func (m *Manager) Destroy(ctx context.Context, s Spec, gcsAddr string) []finding.Finding {
	s, found := m.dropUnreachable(ctx, s, s.WorkerNames())
	release, err := m.Lock(ctx, Holder(), endpoints(s)...)
	if err != nil {
		return append(found, failed(nil, "Cannot lock the nodes", err))
	}
	defer release()
	if stopErrs := m.stopWorkers(ctx, s, s.WorkerNames(), gcsAddr); len(stopErrs) > 0 {
		return append(found, stopErrs...)
	}
	if err := m.Stop(ctx, s, s.Head, gcsAddr); err != nil {
		return append(found, failed(s.Head.Path, "Cannot stop the Ray head", err))
	}
	found = append(found, m.removeToken(ctx, s, s.Head)...)
	for _, name := range s.WorkerNames() {
		found = append(found, m.removeToken(ctx, s, s.Workers[name])...)
	}
	return found
}

// stopWorkers stops Ray on the named workers in parallel; the errors, in
// name order, are each on its worker's attribute.
func (m *Manager) stopWorkers(ctx context.Context, s Spec, names []string, gcsAddr string) []finding.Finding {
	var mu sync.Mutex
	errs := map[string]error{}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			if err := m.Stop(ctx, s, s.Workers[name], gcsAddr); err != nil {
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return workerFailures(s, "Cannot stop Ray worker", errs)
}

// dropUnreachable takes the named workers that cannot be reached at all out
// of s (the spec it returns; s itself is not changed), with a warning each:
// a worker that is being removed, or whose cluster is being destroyed, must
// not hold the operation hostage. Ray on such a worker, if it still runs,
// stops by itself once it has lost its head's GCS for
// gcs_rpc_server_reconnect_timeout_s (60 s by default, Ray's
// src/ray/common/ray_config_def.h); and it is no longer in state.
func (m *Manager) dropUnreachable(ctx context.Context, s Spec, names []string) (Spec, []finding.Finding) {
	var found []finding.Finding
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			_, errs[i] = m.Pool.Get(ctx, s.Workers[name].Endpoint)
		})
	}
	wg.Wait()
	s.Workers = maps.Clone(s.Workers)
	for i, name := range names {
		if !transport.Unreachable(errs[i]) {
			continue
		}
		found = append(found, unreachableWorker(s.Workers[name], errs[i]))
		delete(s.Workers, name)
	}
	return s, found
}

// unreachableWorker is the warning for a worker dropUnreachable leaves out.
func unreachableWorker(w NodeSpec, err error) finding.Finding {
	return warning(w.Path, "Worker unreachable: Ray on it was not stopped",
		fmt.Sprintf("%v.\n\nWorker %s is removed from state anyway. If Ray still runs there, it stops by itself about a minute "+
			"after it loses the head; if the node comes back with Ray running, run `ray stop` there. The Ray auth token the provider "+
			"wrote there (~/.ray/auth_token) stays until a cluster of this provider uses the node again and is destroyed, or "+
			"you remove it.", err, w.Name))
}
