// Import discovery: finding the Ray cluster already running on a head, and
// the addresses of a node, so an imported cluster's nodes can be matched
// with the rows of Ray's node table.

package raycluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

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

// Discovered is what an import reads of the cluster running on a head.
type Discovered struct {
	HeadIP  string            // the address the head registered, from the GCS address Ray recorded
	GCSPort int               // the GCS port, from the same
	Workers map[string]string // worker name -> the IP Ray registered for it (found ones only)
	// AuthToken: the head has an auth token, so the cluster is taken to
	// use token authentication.
	AuthToken bool
}

// Discover reads the cluster running on s's head for an import: the head's
// GCS address from the file Ray keeps on the head, and each worker of s's
// registered IP by matching its addresses against the node table. A worker
// that cannot be read, or is not in the table, is an error on it; the
// others are still matched.
func (m *Manager) Discover(ctx context.Context, s Spec) (Discovered, []finding.Finding) {
	d := Discovered{Workers: map[string]string{}}
	addr, err := m.CurrentCluster(ctx, s)
	if err != nil {
		return d, []finding.Finding{failed(nil, "Cannot import the Ray cluster", err)}
	}
	host, port, _ := net.SplitHostPort(addr)
	d.HeadIP = host
	d.GCSPort, _ = strconv.Atoi(port)
	s.GCSPort = d.GCSPort
	t, err := m.Table(ctx, s, addr)
	if err != nil || !t.GCSUp {
		return d, []finding.Finding{{Summary: "Cannot import the Ray cluster",
			Detail: fmt.Sprintf("reading the node table at %s: %v %s", addr, err, t.GCSError)}}
	}
	var found []finding.Finding
	for _, name := range s.WorkerNames() {
		ip, f := m.matchWorker(ctx, s, s.Workers[name], t, addr)
		if f != nil {
			found = append(found, *f)
			continue
		}
		d.Workers[name] = ip
	}
	if token, err := m.ReadToken(ctx, s); err == nil && token != "" {
		d.AuthToken = true
	}
	return d, found
}

// matchWorker is the IP the node table has alive for one of the worker's
// addresses (not the head's row), or the error on the worker that says why
// there is none. gcsAddr names the cluster in that error.
func (m *Manager) matchWorker(ctx context.Context, s Spec, w NodeSpec, t ray.Table, gcsAddr string) (string, *finding.Finding) {
	addrs, err := m.NodeAddresses(ctx, s, w)
	if err != nil {
		d := failed(w.Path, "Cannot import worker", err)
		return "", &d
	}
	ip := ""
	for _, a := range addrs {
		if n, ok := t.Alive(a); ok && !n.IsHead {
			ip = a
		}
	}
	if ip == "" {
		return "", &finding.Finding{Path: w.Path, Summary: "Worker is not in the Ray cluster",
			Detail: fmt.Sprintf("worker %s (%s) has none of its addresses (%s) registered in the cluster at %s.", w.Name,
				w.Endpoint.Host, strings.Join(addrs, ", "), gcsAddr)}
	}
	return ip, nil
}
