// Package preflight holds the plan-time rules: pure functions that take
// facts gathered from the nodes and return diagnostics that name the node,
// the values seen and the fix. No I/O happens here, so every rule is
// table-tested and the inputs fuzzed.
package preflight

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/pyversion"
)

// Node is one planned Ray node with the facts read from it.
type Node struct {
	Name    string       // "head" or the worker's map key
	Path    finding.Path // the node object's attribute: head, or workers["spark2"]
	SSHHost string
	NodeIP  string // configured node_ip; "" = Ray detects
	NumGPUs *int64
	// Interface is the node's declared fabric port (the cluster's per-node
	// interface), which its Ray gets as NodeInterfaceVars; "" none.
	Interface string
	Facts     nodefacts.Facts
	// RayCommand is how the node's Ray is run (runtime's ray_command), for
	// the message when it is not found.
	RayCommand string
}

func (n Node) attr(name string) finding.Path { return n.Path.Attr(name) }

// addresses lists a node's addresses for messages, without loopback.
func addresses(f nodefacts.Facts) string {
	var out []string
	for _, i := range f.Interfaces {
		for _, a := range i.Addresses {
			if a.Addr().IsLoopback() || a.Addr().IsLinkLocalUnicast() {
				continue
			}
			out = append(out, fmt.Sprintf("%s on %s", a.Addr(), i.Name))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// NodeIPBound (D3): a configured node_ip must be an address of that node.
func NodeIPBound(n Node) []finding.Finding {
	if n.NodeIP == "" {
		return nil
	}
	ip, err := netip.ParseAddr(n.NodeIP)
	if err != nil || n.Facts.HasAddress(ip) {
		return nil
	}
	return []finding.Finding{{Rule: D3, Node: n.Name, Path: n.attr("node_ip"),
		Summary: "node_ip is not an address of this node",
		Detail: fmt.Sprintf("%s (%s): node_ip = %q, but the node's addresses are: %s. Ray would register an address nothing "+
			"listens on and its processes would fail to bind. Set node_ip to one of the node's addresses (its fabric address "+
			"for multi-node traffic), or check that ssh_host points at the node you meant.",
			n.Name, n.SSHHost, n.NodeIP, addresses(n.Facts))}}
}

// RegisteredAddressGone (D3, now): the address Ray registered for a running
// node must still be on it. A fabric link down, or an address moved, leaves
// Ray reporting the node alive for up to a minute (its heartbeat timeout)
// while nothing on the node answers there: the cluster is broken now, and
// the plan says so even when it would start nothing.
func RegisteredAddressGone(n Node, registered string) []finding.Finding {
	ip, err := netip.ParseAddr(registered)
	if err != nil || n.Facts.HasAddress(ip) {
		return nil
	}
	return []finding.Finding{{Rule: D3, Now: true, Node: n.Name, Path: n.attr("node_ip"),
		Summary: "The address Ray registered for a node is no longer on it",
		Detail: fmt.Sprintf("%s (%s): Ray registered it as node:%s, but that address is no longer on the node (its addresses: %s). "+
			"Ray still counts the node until its heartbeats time out; nothing reaches it there. Bring the interface back (a "+
			"fabric link down?), or change node_ip and apply to restart it on an address it has.",
			n.Name, n.SSHHost, registered, addresses(n.Facts))}}
}

// PredictHeadIP is what the head will register: node_ip, else Ray's own
// detection (the source address of the route to 8.8.8.8).
func PredictHeadIP(head Node) (string, []finding.Finding) {
	if head.NodeIP != "" {
		return head.NodeIP, nil
	}
	if head.Facts.DefaultRouteIP != "" {
		return head.Facts.DefaultRouteIP, nil
	}
	return "", []finding.Finding{{Rule: D14, Node: head.Name, Path: head.attr("node_ip"),
		Summary: "Cannot predict the head's Ray address",
		Detail: fmt.Sprintf("head (%s) has no default route, so Ray's own detection (the route to 8.8.8.8) would fall back to "+
			"hostname resolution or 127.0.0.1. Set head.node_ip to the address workers should join (one of: %s).",
			head.SSHHost, addresses(head.Facts))}}
}

// PredictWorkerIP is what a worker will register: node_ip, else Ray's
// detection on a worker (the source address of its route to the head).
func PredictWorkerIP(w Node, headIP string) (string, []finding.Finding) {
	if w.NodeIP != "" {
		return w.NodeIP, nil
	}
	if w.Facts.RouteTo != nil && w.Facts.RouteTo.Src != "" {
		return w.Facts.RouteTo.Src, nil
	}
	return "", []finding.Finding{{Rule: D5, Node: w.Name, Path: w.attr("node_ip"),
		Summary: "Worker has no route to the head",
		Detail: fmt.Sprintf("worker %q (%s) has no route to the head's Ray address %s, so it can neither join nor detect its own "+
			"address. Its addresses: %s. Give the head a node_ip on a network this worker shares, or fix the worker's network.",
			w.Name, w.SSHHost, headIP, addresses(w.Facts))}}
}

// WorkerReachesHead (D5): the worker's route to the head's registered IP
// must be on a directly connected network (no gateway: Ray's fabric traffic
// does not cross routers in a lab), and when the head is up its GCS port
// must answer.
func WorkerReachesHead(w Node, headIP string, gcsPort int) []finding.Finding {
	r := w.Facts.RouteTo
	switch {
	case r == nil:
		return []finding.Finding{{Rule: D5, Node: w.Name, Path: w.attr("ssh_host"),
			Summary: "Worker cannot reach the head",
			Detail: fmt.Sprintf("worker %q (%s) has no route to the head's Ray address %s:%d. Its addresses: %s. "+
				"Connect the worker to the head's network, or give the head a node_ip on a network the worker shares.",
				w.Name, w.SSHHost, headIP, gcsPort, addresses(w.Facts))}}
	case r.Gateway != "":
		return []finding.Finding{{Rule: D5, Node: w.Name, Path: w.attr("ssh_host"),
			Summary: "Worker reaches the head only through a gateway",
			Detail: fmt.Sprintf("worker %q (%s) would reach the head's Ray address %s through gateway %s on %s, not over a shared "+
				"network: it is not on the head's fabric (its addresses: %s). Ray and NCCL traffic would leave the fabric or fail. "+
				"Connect the worker to the head's network, or set head.node_ip to an address on a network the worker shares.",
				w.Name, w.SSHHost, headIP, r.Gateway, r.Dev, addresses(w.Facts))}}
	}
	if t := w.Facts.TCP; t != "" && t != "open" && t != "unknown" {
		return []finding.Finding{{Rule: D5, Node: w.Name, Path: w.attr("ssh_host"),
			Summary: "Worker cannot open the head's GCS port",
			Detail: fmt.Sprintf("worker %q (%s) has a route to %s but a TCP connection to %s:%d failed (%s). "+
				"Check firewalls between the nodes and that gcs_port is right.", w.Name, w.SSHHost, headIP, headIP, gcsPort, t)}}
	}
	return nil
}

// HeadReachesWorker (D5): the head must reach the address a worker
// registers. Ray's GCS checks each raylet's health there and marks a node
// it cannot reach dead (GcsHealthCheckManager, src/ray/gcs/
// gcs_health_check_manager.cc, 2.52.1), and vLLM's RayExecutorV2 binds
// each worker's message queues on that address, which the head connects to
// (vllm/v1/executor/ray_executor_v2.py, 0.32.0). Checked where the head's
// route to it was read (the worker's address known before the plan read
// the nodes: its node_ip, or what it registered); a route through a
// gateway serves, off the fabric, and is a warning.
func HeadReachesWorker(head, w Node, ip string) []finding.Finding {
	r, asked := head.Facts.PeerRoutes[ip]
	switch {
	case !asked || ip == "":
		return nil
	case r == nil:
		return []finding.Finding{{Rule: D5, Node: w.Name, Path: w.attr("node_ip"),
			Summary: "The head cannot reach the worker",
			Detail: fmt.Sprintf("the head (%s) has no route to %s, the address worker %q (%s) registers with Ray. Ray's GCS checks "+
				"each node's health at that address and would mark the worker dead; vLLM's workers listen there too. The head's "+
				"addresses: %s. Put the head on the worker's network, or set the worker's node_ip to an address on a network "+
				"the head shares.", head.SSHHost, ip, w.Name, w.SSHHost, addresses(head.Facts))}}
	case r.Gateway != "":
		return []finding.Finding{{Rule: D5, Node: w.Name, Path: w.attr("node_ip"), Warning: true,
			Summary: "The head reaches the worker only through a gateway",
			Detail: fmt.Sprintf("the head (%s) would reach %s, the address worker %q (%s) registers, through gateway %s on %s, "+
				"not over a shared network: Ray's and vLLM's traffic to that worker would leave the fabric. Put the head on the "+
				"worker's network, or set the worker's node_ip to an address on a network the head shares.",
				head.SSHHost, ip, w.Name, w.SSHHost, r.Gateway, r.Dev)}}
	}
	return nil
}

// UniqueIPs (D13): no two nodes may register one IP.
func UniqueIPs(nodes []Node, registered map[string]string) []finding.Finding {
	by := map[string][]string{}
	for _, n := range nodes {
		if ip := registered[n.Name]; ip != "" {
			by[ip] = append(by[ip], n.Name)
		}
	}
	var out []finding.Finding
	for _, ip := range slices.Sorted(maps.Keys(by)) {
		names := by[ip]
		if len(names) < 2 {
			continue
		}
		n := findNode(nodes, names[1])
		out = append(out, finding.Finding{Rule: D13, Node: names[1], Path: n.attr("node_ip"),
			Summary: "Two nodes would register the same IP",
			Detail: fmt.Sprintf("nodes %s would all register %s with Ray. Ray keys nodes by IP (node:%s); vLLM refuses "+
				"clusters where \"every node should have a unique IP address\". Give each node its own node_ip, or check ssh_host.",
				strings.Join(names, " and "), ip, ip)})
	}
	return out
}

// SameVersions (D6, D7): Ray refuses to join nodes with another Ray or
// Python version; say which node has which before anything starts.
func SameVersions(nodes []Node) []finding.Finding {
	var out []finding.Finding
	for _, what := range []struct {
		rule Rule
		name string
		get  func(nodefacts.Facts) string
		fix  string
	}{
		{D6, "Ray", func(f nodefacts.Facts) string { return f.RayVersion }, "install the same Ray version on every node (pip install ray==<version>)"},
		{D7, "Python", func(f nodefacts.Facts) string { return f.PythonVersion }, "run Ray under the same Python minor version on every node"},
	} {
		seen := map[string][]string{}
		var missing []Node
		for _, n := range nodes {
			if v := what.get(n.Facts); v != "" {
				seen[v] = append(seen[v], n.Name)
			} else {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			out = append(out, notFound(what.rule, what.name, missing))
		}
		if len(seen) > 1 {
			var parts []string
			for _, v := range slices.Sorted(maps.Keys(seen)) {
				parts = append(parts, fmt.Sprintf("%s on %s", v, strings.Join(seen[v], ", ")))
			}
			out = append(out, finding.Finding{Rule: what.rule, Summary: what.name + " versions differ across nodes",
				Detail: fmt.Sprintf("%s %s. Ray refuses to join nodes whose versions differ. Fix: %s.", what.name, strings.Join(parts, "; "), what.fix)})
		}
	}
	return out
}

// notFound is D6's or D7's finding for the nodes missing Ray or Python,
// each with where it was looked for.
func notFound(rule Rule, name string, missing []Node) finding.Finding {
	var where []string
	fix := ""
	for _, n := range missing {
		w := n.Name + " (" + n.SSHHost + ")"
		if n.RayCommand != "" {
			w += fmt.Sprintf(", ray_command %q", n.RayCommand)
		}
		where = append(where, w)
		if rule == D6 && fix == "" {
			fix = noRayFix(n.Facts)
		}
	}
	return finding.Finding{Rule: rule, Summary: name + " not found on a node",
		Detail: fmt.Sprintf("%s was not found on %s. Install it, or point runtime.host.ray_command at it.%s", name, strings.Join(where, ", "), fix)}
}

// noRayFix names vLLM's own multi-node mode where a node has vLLM but no
// Ray (NVIDIA's vLLM containers since 26.04); "" where it has no vLLM.
func noRayFix(f nodefacts.Facts) string {
	if f.VLLMVersion == "" {
		return ""
	}
	return fmt.Sprintf(" vLLM %s is there without Ray, as in NVIDIA's vLLM containers since 26.04: vLLM 0.11.1 "+
		"and later serve across nodes without Ray, and spark_vllm_mp_deployment declares that mode (--nnodes, "+
		"--headless) with no spark_ray_cluster.", f.VLLMVersion)
}

// WorkerHostIP (D10): vLLM's worker actors read VLLM_HOST_IP from the
// environment their raylet was started with. One value in the cluster-wide
// env is the same on every node, so it can match at most one node's
// registered IP.
func WorkerHostIP(env map[string]string, nodes []Node, registered map[string]string) []finding.Finding {
	v, ok := env["VLLM_HOST_IP"]
	if !ok {
		return nil
	}
	var wrong []string
	for _, n := range nodes {
		if ip := registered[n.Name]; ip != "" && ip != v {
			wrong = append(wrong, fmt.Sprintf("%s registers %s", n.Name, ip))
		}
	}
	if len(wrong) == 0 {
		return nil
	}
	return []finding.Finding{{Rule: D10, Path: finding.Attr("env"),
		Summary: "VLLM_HOST_IP in env does not match the nodes' Ray addresses",
		Detail: fmt.Sprintf("env VLLM_HOST_IP = %q reaches Ray on every node, but %s. vLLM's worker actors read VLLM_HOST_IP from "+
			"their raylet's environment, so their addresses would disagree with Ray's and vLLM's unique-IP checks fail. Remove "+
			"VLLM_HOST_IP from env: the provider sets it on each node to the address Ray registers there.", v, strings.Join(wrong, ", "))}}
}

// tokenAuthSince is the first Ray release with token authentication.
const tokenAuthSince = "2.52.0"

// TokenAuthSupported: auth_mode = "token" needs Ray 2.52.0 or later on every
// node; older raylets would ignore RAY_AUTH_MODE and run unauthenticated.
func TokenAuthSupported(nodes []Node) []finding.Finding {
	var old []string
	for _, n := range nodes {
		if v := n.Facts.RayVersion; v != "" && versionLess(v, tokenAuthSince) {
			old = append(old, fmt.Sprintf("%s has Ray %s", n.Name, v))
		}
	}
	if len(old) == 0 {
		return nil
	}
	return []finding.Finding{{Rule: D16, Path: finding.Attr("auth_mode"),
		Summary: "Ray too old for token authentication",
		Detail: fmt.Sprintf("auth_mode = \"token\" needs Ray %s or later, but %s: it would run without authentication. "+
			"Upgrade Ray on every node, or set auth_mode = \"disabled\" knowingly.", tokenAuthSince, strings.Join(old, ", "))}}
}

// versionLess compares release versions ("2.9.3" < "2.52.0"); a
// pre-release counts as its release, and an unreadable version is not less.
func versionLess(a, b string) bool {
	va, erra := pyversion.Parse(a)
	vb, errb := pyversion.Parse(b)
	return erra == nil && errb == nil && !va.AtLeast(vb.Release...)
}

// InterfaceVars are the env variables that name a network interface.
var InterfaceVars = []string{"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES"}

// NodeInterfaceVars are what a node's declared interface sets in its Ray's
// environment: the variables NCCL and Gloo (torch.distributed's CPU
// transport, which vLLM's workers also open) pick their socket with.
var NodeInterfaceVars = []string{"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}

// NodeInterfaces (D9): a node's declared interface must exist on it, be up
// and carry the address Ray registers for it; the variables it sets are not
// given in env too (one setting, given twice, would leave which one wins
// to the order of a map).
func NodeInterfaces(env map[string]string, nodes []Node, registered map[string]string) []finding.Finding {
	var out []finding.Finding
	for _, n := range nodes {
		if n.Interface == "" {
			continue
		}
		for _, v := range NodeInterfaceVars {
			if val, ok := env[v]; ok {
				out = append(out, finding.Finding{Rule: D9, Node: n.Name, Path: finding.Attr("env").Key(v),
					Summary: "Interface given twice",
					Detail: fmt.Sprintf("env %s = %q, and %s sets %q, which its Ray gets as %s too. Remove %s from env: "+
						"each node's interface sets it on that node.", v, val, n.attr("interface"), n.Interface, v, v)})
			}
		}
		iface, found := findInterface(n.Facts, n.Interface)
		ip := registered[n.Name]
		switch {
		case !found:
			out = append(out, finding.Finding{Rule: D9, Node: n.Name, Path: n.attr("interface"),
				Summary: "Interface does not exist on its node",
				Detail: fmt.Sprintf("interface = %q, but %s (%s) has no interface of that name (its interfaces: %s). "+
					"Name this node's fabric port as `ip -br addr` shows it there.", n.Interface, n.Name, n.SSHHost, ifaceNames(n.Facts))})
		case !iface.Up:
			out = append(out, finding.Finding{Rule: D9, Node: n.Name, Path: n.attr("interface"),
				Summary: "Interface is down",
				Detail: fmt.Sprintf("interface = %q is down on %s (%s): NCCL and Gloo would find no address on it. "+
					"Bring the link up (`ip link set %s up`, check the cable), or name the port that is.", n.Interface, n.Name, n.SSHHost, n.Interface)})
		case ip != "" && !carries(iface, ip):
			out = append(out, finding.Finding{Rule: D9, Node: n.Name, Path: n.attr("interface"),
				Summary: "Interface does not carry the node's Ray address",
				Detail: fmt.Sprintf("interface = %q, but on %s (%s) it carries %s, not %s, the address Ray registers for that node. "+
					"Collective traffic would run on another network than Ray's. Name the interface that carries %s, "+
					"or set node_ip to an address on %s.", n.Interface, n.Name, n.SSHHost, prefixes(iface), ip, ip, n.Interface)})
		}
	}
	return out
}

// Interfaces (D9): interface names in env must exist on every node and
// carry that node's registered IP, or NCCL/Gloo traffic goes elsewhere.
// Values may be comma lists; NCCL's "^" (exclude) and "=" (exact) prefixes
// are understood; UCX's "mlx5_0:1" device names are not interfaces and
// are skipped.
func Interfaces(env map[string]string, nodes []Node, registered map[string]string) []finding.Finding {
	var out []finding.Finding
	for _, v := range InterfaceVars {
		val, ok := env[v]
		if !ok || val == "" || strings.HasPrefix(val, "^") {
			continue
		}
		for _, name := range strings.Split(strings.TrimPrefix(val, "="), ",") {
			name = strings.TrimSpace(name)
			if name == "" || strings.Contains(name, ":") || name == "all" {
				continue
			}
			for _, n := range nodes {
				iface, found := findInterface(n.Facts, name)
				ip := registered[n.Name]
				switch {
				case !found:
					out = append(out, finding.Finding{Rule: D9, Node: n.Name, Path: finding.Attr("env"),
						Summary: "Interface named in env does not exist",
						Detail: fmt.Sprintf("env %s = %q, but %s (%s) has no interface %q (its interfaces: %s). "+
							"Use an interface that exists on every node with the same name, or, where the nodes name their "+
							"fabric ports differently, remove %s from env and declare each node's own port in the cluster's "+
							"`interface` (head.interface, workers[<name>].interface).",
							v, val, n.Name, n.SSHHost, name, ifaceNames(n.Facts), v)})
				case ip != "" && !carries(iface, ip):
					out = append(out, finding.Finding{Rule: D9, Node: n.Name, Path: finding.Attr("env"),
						Summary: "Interface named in env does not carry the node's Ray address",
						Detail: fmt.Sprintf("env %s = %q, but on %s (%s) interface %s carries %s, not %s, the address Ray registers "+
							"for that node. Collective traffic would run on another network than Ray's. Name the interface "+
							"that carries %s, or set node_ip to an address on %s.",
							v, val, n.Name, n.SSHHost, name, prefixes(iface), ip, ip, name)})
				}
			}
		}
	}
	return out
}

// GPUs: num_gpus must not exceed the GPUs nvidia-smi lists, where it exists.
func GPUs(n Node) []finding.Finding {
	if n.NumGPUs == nil || !n.Facts.HasNvidiaSMI || *n.NumGPUs <= int64(n.Facts.GPUCount) {
		return nil
	}
	return []finding.Finding{{Rule: D15, Node: n.Name, Path: n.attr("num_gpus"),
		Summary: "num_gpus exceeds the node's GPUs",
		Detail: fmt.Sprintf("%s (%s): num_gpus = %d, but nvidia-smi lists %d GPU(s). Ray would advertise GPUs that do not "+
			"exist and tasks placed on them would fail. Set num_gpus to at most %d, or leave it unset to let Ray count them.",
			n.Name, n.SSHHost, *n.NumGPUs, n.Facts.GPUCount, n.Facts.GPUCount)}}
}

// GCSPortFree (D12): before a head starts, nothing may listen on the GCS
// port: a stale Ray (gcs_server) or another program would make `ray start
// --head` fail or, worse, workers join the wrong cluster. The one Ray that
// may be there is an orphan of this provider: a create of a cluster on this
// head and port that never finished (startedBy: what its start marker says;
// "" when there is none), which the apply stops and replaces.
func GCSPortFree(head Node, port int, startedBy string) []finding.Finding {
	if len(head.Facts.Listeners) == 0 {
		return nil
	}
	holders := strings.Join(head.Facts.Listeners, ", ")
	if startedBy != "" && strings.Contains(holders, "gcs_server") {
		return []finding.Finding{{Rule: D12, Node: head.Name, Path: finding.Attr("gcs_port"), Warning: true,
			Summary: "An unfinished create left Ray running on the head",
			Detail: fmt.Sprintf("gcs_port = %d on the head (%s) is held by the Ray a create of this cluster started and never "+
				"finished (%s; the apply was interrupted or killed). Apply stops it and creates the cluster.", port, head.SSHHost, startedBy)}}
	}
	fix := "stop that program or choose another gcs_port"
	if strings.Contains(holders, "gcs_server") {
		fix = "a Ray cluster this resource does not manage is running there: stop it (`ray stop` on the head) or import it " +
			"(terraform import <address> " + head.SSHHost + ")"
	}
	return []finding.Finding{{Rule: D12, Node: head.Name, Path: finding.Attr("gcs_port"),
		Summary: "GCS port is already in use on the head",
		Detail:  fmt.Sprintf("gcs_port = %d is held on the head (%s) by %s: %s.", port, head.SSHHost, holders, fix)}}
}

// ServePortFree: vllm serve binds its port only after loading the model
// (minutes, on a large one), so a port already held makes it fail late, or,
// worse, lets the readiness gate talk to whatever holds it. holders are the
// processes listening on the port on the head.
func ServePortFree(sshHost string, port int, holders []string) []finding.Finding {
	if len(holders) == 0 {
		return nil
	}
	return []finding.Finding{{Rule: D17, Path: finding.Attr("port"),
		Summary: "vLLM port is already in use on the head",
		Detail: fmt.Sprintf("port = %d is held on the head (%s) by %s. vllm serve would load the model and then fail to bind "+
			"it. Stop that program, or choose another port.", port, sshHost, strings.Join(holders, ", "))}}
}

func findNode(nodes []Node, name string) Node {
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	return Node{Name: name}
}

func findInterface(f nodefacts.Facts, name string) (nodefacts.Interface, bool) {
	for _, i := range f.Interfaces {
		if i.Name == name {
			return i, true
		}
	}
	return nodefacts.Interface{}, false
}

func carries(i nodefacts.Interface, ip string) bool {
	for _, a := range i.Addresses {
		if a.Addr().String() == ip {
			return true
		}
	}
	return false
}

func prefixes(i nodefacts.Interface) string {
	if len(i.Addresses) == 0 {
		return "no address"
	}
	var s []string
	for _, a := range i.Addresses {
		s = append(s, a.String())
	}
	return strings.Join(s, ", ")
}

func ifaceNames(f nodefacts.Facts) string {
	var s []string
	for _, i := range f.Interfaces {
		s = append(s, i.Name)
	}
	return strings.Join(s, ", ")
}
