// Ray's node table, read through the head: what registered and where.
// Readers at plan time (refresh, plan, data sources) share a snapshot for a
// few seconds, so one plan does not read the same table once per resource.

package raycluster

import (
	"context"
	"time"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

type snapshot struct {
	table ray.Table
	at    time.Time
}

// snapshotTTL bounds how long a node table read serves later readers: one
// plan reads it for the cluster's refresh and again for every deployment
// on it; a few seconds covers a plan, and anything this process starts or
// stops drops the snapshots at once.
const snapshotTTL = 10 * time.Second

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
