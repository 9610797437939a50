// Ray's node table, read through the head: what registered and where.
// Readers at plan time (refresh, plan, data sources) share a snapshot for a
// few seconds, so one plan does not read the same table once per resource.

package raycluster

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	"golang.org/x/crypto/ssh"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raygcs"
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

// forget drops every snapshot and every token read: something was started
// or stopped.
func (m *Manager) forget() {
	m.mu.Lock()
	m.snapshots = map[string]snapshot{}
	m.tokens = map[string]string{}
	m.mu.Unlock()
}

// Table reads Ray's node table through the head: from the GCS's gRPC
// service through the SSH connection (no Python on the node), else with
// ray.NodesScript in Ray's own Python, which also covers Ray releases whose
// messages differ and sshds that forward no ports. When the head itself
// does not answer (the token read fails), the error comes back at once: the
// Python read would ask the same head the same way, and a plan on a dead
// head would wait twice.
func (m *Manager) Table(ctx context.Context, s Spec, gcsAddr string) (ray.Table, error) {
	t, err := m.TableOverGRPC(ctx, s, gcsAddr)
	var unread *grpcUnread
	if err == nil || !errors.As(err, &unread) {
		return t, err
	}
	tflog.Debug(ctx, "Ray node table: the GCS's gRPC service did not answer, reading it with Python", map[string]any{"gcs": gcsAddr, "reason": err.Error()})
	return m.TableWithPython(ctx, s, gcsAddr)
}

// grpcUnread is a gRPC reading that failed past the head's shell: the
// tunnel or the GCS's answer. Table reads with Python then.
type grpcUnread struct{ err error }

func (e *grpcUnread) Error() string { return "GCS over gRPC: " + e.err.Error() }
func (e *grpcUnread) Unwrap() error { return e.err }

// TableWithPython reads the table with ray.NodesScript in Ray's own Python.
func (m *Manager) TableWithPython(ctx context.Context, s Spec, gcsAddr string) (ray.Table, error) {
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

// TableOverGRPC reads the table from the GCS's gRPC service, through a
// tunnel from the head to the GCS address. A refused tunnel is the same
// proof of a GCS gone as NodesScript's refused socket (both connect from
// the head). A failure to run the token read is returned as it is; any
// other failure is a *grpcUnread, and Table reads with Python.
//
// The token is read once per head and GCS address in this process, while
// nothing this process does starts or stops Ray (forget drops it), so a
// registration wait polls the GCS alone. A token read moments ago that the
// GCS no longer takes (another apply replaced it), or a refused tunnel
// after it (the container may have stopped: only the read through the
// runtime says so), reads the token again, once.
func (m *Manager) TableOverGRPC(ctx context.Context, s Spec, gcsAddr string) (ray.Table, error) {
	key := tokenKey(s, gcsAddr)
	token, cached := m.cachedToken(key)
	if !cached {
		read := []string{"sh", "-c", tokenReadScript}
		argv := s.Runtime.Wrap(read, false)
		if c := s.Runtime.Container; c != nil {
			argv = s.Runtime.WrapIfRunning(read, ray.NotRunningLine(c.Name))
		}
		res, err := m.run(ctx, s.Head.Endpoint, "read Ray auth token", argv)
		if err != nil {
			return ray.Table{}, err
		}
		if out := string(res.Stdout); strings.HasPrefix(out, "@@nodes ") {
			return ray.ParseNodes(out) // the runtime's container is not running
		}
		token = strings.TrimSpace(string(res.Stdout))
	}
	conn, err := m.Pool.Get(ctx, s.Head.Endpoint)
	if err != nil {
		return ray.Table{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, raygcs.Timeout)
	defer cancel()
	r, err := raygcs.Read(rctx, conn.DialContext, gcsAddr, token)
	if err != nil && cached {
		m.dropToken(key)
		return m.TableOverGRPC(ctx, s, gcsAddr)
	}
	if refused(err) {
		return ray.Table{GCSError: "connection refused, from the head"}, nil
	}
	if err != nil {
		return ray.Table{}, &grpcUnread{err}
	}
	m.keepToken(key, token)
	host, _, _ := net.SplitHostPort(gcsAddr)
	return r.Table(host, m.driverParents(ctx, s, r.DriversOn(host))), nil
}

// tokenKey names whose token a table read sends: the head's SSH user and
// host, the runtime's container, and the GCS.
func tokenKey(s Spec, gcsAddr string) string {
	container := ""
	if c := s.Runtime.Container; c != nil {
		container = c.Name
	}
	return s.Head.Endpoint.User + "@" + s.Head.Endpoint.Host + ":" + strconv.Itoa(s.Head.Endpoint.Port) + "|" + container + "|" + gcsAddr
}

func (m *Manager) cachedToken(key string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[key]
	return t, ok
}

func (m *Manager) keepToken(key, token string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tokens == nil {
		m.tokens = map[string]string{}
	}
	m.tokens[key] = token
}

func (m *Manager) dropToken(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tokens, key)
}

// refused reports whether the head's sshd found nothing listening at the
// tunnel's address ("connect failed (Connection refused)").
func refused(err error) bool {
	var oc *ssh.OpenChannelError
	return errors.As(err, &oc) && oc.Reason == ssh.ConnectionFailed && strings.Contains(strings.ToLower(oc.Message), "connection refused")
}

// driverParents names the processes that started the placement groups'
// drivers on the head (vLLM's `vllm serve`), for the diagnostics that say
// who holds a GPU. Only a name is lost if it fails.
func (m *Manager) driverParents(ctx context.Context, s Spec, pids []int64) map[int64]raygcs.Parent {
	if len(pids) == 0 {
		return nil
	}
	argv := []string{"sh", "-c", raygcs.ParentsScript, "sh"}
	for _, p := range pids {
		argv = append(argv, strconv.FormatInt(p, 10))
	}
	res, err := m.run(ctx, s.Head.Endpoint, "name placement groups' drivers", s.Runtime.Wrap(argv, false))
	if err != nil {
		return nil
	}
	return raygcs.ParseParents(string(res.Stdout))
}
