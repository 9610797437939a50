// Import discovery: finding the Ray cluster already running on a head, and
// the addresses of a node, so an imported cluster's nodes can be matched
// with the rows of Ray's node table.

package raycluster

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
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
