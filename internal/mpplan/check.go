package mpplan

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/pyversion"
	"github.com/lab-infra/terraform-provider-spark/internal/supervise"
)

// The rules of this mode, defined in the catalogue (internal/preflight,
// rules.go, which the README's table mirrors).
const (
	D25 = preflight.D25 // ranks and the world size
	D26 = preflight.D26 // the master address
	D27 = preflight.D27 // a node's fabric address and interface
	D28 = preflight.D28 // vLLM on each node: present, new enough, the same
	D29 = preflight.D29 // a port vLLM binds, held
	D30 = preflight.D30 // /dev/shm
	D31 = preflight.D31 // the model's files on each node
	D34 = preflight.D34 // the supervisor restart needs
)

// MinVLLM is the first vLLM release whose multiprocessing executor spans
// nodes: `--nnodes`, `--node-rank`, `--master-addr`, `--master-port` and
// `--headless` for it arrived with vLLM PR #23691 (in 0.11.1's
// vllm/engine/arg_utils.py, absent from 0.11.0's; an older vLLM exits with
// "unrecognized arguments: --nnodes").
var MinVLLM = [3]int{0, 11, 1}

// ShmNeed is the free /dev/shm vLLM's shared-memory message queues take on
// node n, each refused at startup when it does not fit ("Insufficient space
// in /dev/shm", vllm/distributed/device_communicators/shm_broadcast.py
// check_shm_free_space, v0.32.0 L228-263): on rank 0, the scheduler's
// broadcast ring, (16 MiB + 1 + L) x 10 chunks for its L local workers
// (v1/executor/multiproc_executor.py L151, L164-170); on every node, a
// 4 MiB x 6 ring for each queue another node reads: each worker's response
// queue on a headless node, and the tensor-parallel broadcaster where TP
// spans nodes (shm_broadcast.py L485-589, parallel_state.py L2152).
func (s Spec) ShmNeed(n Node) int64 {
	const mib = 1 << 20
	local := int64(1)
	if len(s.Nodes) > 0 && s.WorldSize() >= len(s.Nodes) {
		local = int64(s.WorldSize() / len(s.Nodes))
	}
	need := int64(0)
	if n.Rank == 0 {
		need += (16*mib + 1 + local) * 10
	} else {
		need += local * 24 * mib
	}
	if s.TP*s.PP > int(local) {
		need += 24 * mib // a TP/PP group spans nodes
	}
	return need
}

// Seen is what the plan read of one node.
type Seen struct {
	Facts nodefacts.Facts // interfaces, vLLM's version, the route to the master address
	// Listening holds each port of Ports(...) that something on the node
	// listens on, with what (`ss` shows every user's sockets, not whose).
	Listening map[int]string
	// Routes is the node's route to each address of Peers (nil: none).
	Routes map[string]*nodefacts.Route
	// ShmFree is the free space in /dev/shm; 0: none, or not mounted.
	ShmFree int64
	// ModelMissing says the model, a path, is not a directory on this node
	// ("" it is, or the model is a Hub name); the text is what was found.
	ModelMissing string
	// ModelConfig is the model's config.json there (nil: none, or the model
	// is a Hub name); ModelWeights its weight files' sizes by name.
	ModelConfig  []byte
	ModelWeights map[string]int64
	// Supervisor is what putting a rank under systemd needs of the node
	// and the SSH user there.
	Supervisor supervise.Host
}

// Ports are the ports vLLM binds on node n at fixed numbers: rank 0's API
// port and, without data parallel, the master port, where torch's TCPStore
// listens (every rank dials it: vllm/distributed/parallel_state.py
// L1852-1855, `tcp://<master_addr>:<master_port>`, v0.32.0). The other
// sockets of this mode (the message queues, gloo's and NCCL's, and with
// data parallel its coordinator's and stores, on the data parallel
// address, master_addr by default) take a free port when they bind; with
// data parallel, which store takes the master port was not measured here,
// so it is not checked (a check must never refuse what serves).
func (s Spec) Ports(n Node) []int {
	switch {
	case n.Rank != 0:
		return nil
	case s.dp() > 1:
		return []int{s.Port}
	}
	return []int{s.Port, s.MasterPort}
}

// Peers are the addresses node n's vLLM dials besides the master address:
// rank 0's executor dials each headless node's response queues, bound on
// that node's VLLM_HOST_IP, and every headless worker dials rank 0's
// broadcast queue on rank 0's VLLM_HOST_IP (shm_broadcast.py
// MessageQueue, `tcp://<get_ip()>:<free port>`, v0.32.0 L551-565;
// multiproc_executor.py L148-171). The readiness handshake on those
// queues is a blocking recv with no timeout (shm_broadcast.py L677-708):
// an address the other end cannot reach hangs the start for good.
func (s Spec) Peers(n Node) []string {
	var out []string
	for _, o := range s.Nodes {
		if o.Name != n.Name && o.NodeIP != "" && (n.Rank == 0 || o.Rank == 0) {
			out = append(out, o.NodeIP)
		}
	}
	return out
}

// nodePath is the attribute path of node n's field.
func nodePath(n Node, field string) finding.Path {
	p := finding.Attr("nodes").Key(n.Name)
	if field != "" {
		p = p.Attr(field)
	}
	return p
}

// CheckShape is D25, from the configuration alone: one node per rank, the
// ranks 0 to N-1, and N dividing the world size, as vLLM requires
// (vllm/config/parallel.py, v0.32.0: the world size must be divisible by
// nnodes, and the node rank below nnodes).
func CheckShape(s Spec) []finding.Finding {
	var out []finding.Finding
	byRank := map[int][]string{}
	for _, n := range s.Nodes {
		byRank[n.Rank] = append(byRank[n.Rank], n.Name)
	}
	for r, names := range byRank {
		if len(names) > 1 {
			out = append(out, finding.Finding{Rule: D25, Path: finding.Attr("nodes"), Summary: "Two nodes have the same rank",
				Detail: fmt.Sprintf("Nodes %s all have rank %d. Each node runs one `--node-rank`: give them the ranks 0 to %d, "+
					"one each.", strings.Join(names, ", "), r, len(s.Nodes)-1)})
		}
	}
	for _, n := range s.Nodes {
		if n.Rank < 0 || n.Rank >= len(s.Nodes) {
			out = append(out, finding.Finding{Rule: D25, Path: nodePath(n, "rank"), Summary: "Rank out of range",
				Detail: fmt.Sprintf("Node %s has rank %d, but there are %d nodes: vLLM requires --node-rank below --nnodes. "+
					"Give the nodes the ranks 0 to %d.", n.Name, n.Rank, len(s.Nodes), len(s.Nodes)-1)})
		}
	}
	if w := s.WorldSize(); len(s.Nodes) > 0 && w > 0 && w%len(s.Nodes) != 0 {
		out = append(out, finding.Finding{Rule: D25, Path: finding.Attr("tensor_parallel_size"), Summary: "The nodes do not divide the world size",
			Detail: fmt.Sprintf("tensor_parallel_size %d x pipeline_parallel_size %d x data_parallel_size %d = %d ranks cannot be spread "+
				"evenly over %d nodes: vLLM runs the same number of ranks on every node. Use a multiple of %d ranks, or %s nodes.",
				s.TP, s.PP, s.dp(), w, len(s.Nodes), len(s.Nodes), divisorsOf(w))})
	}
	return out
}

func divisorsOf(w int) string {
	var ds []string
	for d := 1; d <= w; d++ {
		if w%d == 0 {
			ds = append(ds, strconv.Itoa(d))
		}
	}
	return strings.Join(ds, " or ")
}

// Check is every rule against what the plan read of each node (seen, by
// node name; a node missing from seen could not be read, and its error is
// reported where it was read). ours says this deployment already runs:
// the ports it holds are its own.
func Check(s Spec, seen map[string]Seen, ours bool) []finding.Finding {
	out := CheckShape(s)
	if len(out) > 0 || len(s.Nodes) == 0 {
		return out
	}
	out = append(out, checkVersions(s, seen)...)
	for _, n := range s.Nodes {
		if sn, ok := seen[n.Name]; ok {
			out = append(out, checkNode(s, n, sn, ours)...)
		}
	}
	return out
}

// checkNode is every rule of one node.
func checkNode(s Spec, n Node, sn Seen, ours bool) []finding.Finding {
	out := checkFabric(n, sn)
	if why := sn.Supervisor.Refusal(s.Restart, n.Name); why != "" {
		out = append(out, finding.Finding{Rule: D34, Path: finding.Attr("restart"), Node: n.Name,
			Summary: "vLLM cannot be supervised on " + n.Name, Detail: why})
	}
	master := s.Master()
	if masterIP, err := netip.ParseAddr(master); err == nil {
		if n.Rank == 0 && !sn.Facts.HasAddress(masterIP) {
			out = append(out, finding.Finding{Rule: D26, Path: finding.Attr("master_addr"), Node: n.Name,
				Summary: "The master address is not on rank 0's node",
				Detail: fmt.Sprintf("master_addr %s is not bound on node %s (rank 0; its addresses: %s). Rank 0 serves torch's store "+
					"and the scheduler's message queue there, and every other rank dials it: rank 0 fails with \"Cannot assign "+
					"requested address\" or the other ranks wait for a store nobody serves. Set master_addr to rank 0's fabric "+
					"address (%s), or leave it unset.", master, n.Name, addressList(sn.Facts), s.Nodes[0].NodeIP)})
		}
		if n.Rank != 0 {
			out = append(out, checkRoute(n, sn, master)...)
		}
	}
	out = append(out, checkPeers(s, n, sn)...)
	if !ours {
		for _, p := range s.Ports(n) {
			if who, held := sn.Listening[p]; held {
				out = append(out, portHeld(s, n, p, who))
			}
		}
	}
	if need := s.ShmNeed(n); sn.ShmFree < need {
		out = append(out, finding.Finding{Rule: D30, Path: nodePath(n, ""), Node: n.Name, Summary: "/dev/shm too small",
			Detail: fmt.Sprintf("/dev/shm on node %s has %s free; vLLM's message queues for this layout take %s there "+
				"(rank %d) and vLLM refuses to start with \"Insufficient space in /dev/shm\". Give the node (or its "+
				"container: `--shm-size`, `--ipc=host`) a larger /dev/shm, or free it.", n.Name, size(sn.ShmFree), size(need), n.Rank)})
	}
	if sn.ModelMissing != "" {
		out = append(out, finding.Finding{Rule: D31, Path: finding.Attr("model"), Node: n.Name, Summary: "The model is not on every node",
			Detail: fmt.Sprintf("model %s: %s on node %s. Every rank loads its part of the weights from its own node's disk. "+
				"Copy the model there (spark_model), or serve a Hugging Face name each node can download.", s.Model, sn.ModelMissing, n.Name)})
	}
	return out
}

func portHeld(s Spec, n Node, port int, who string) finding.Finding {
	attr, what := "port", "the API server"
	if port == s.MasterPort {
		attr, what = "master_port", "torch's TCPStore (every rank dials it)"
	}
	if who == "" {
		who = "a process of another user"
	}
	return finding.Finding{Rule: D29, Path: finding.Attr(attr), Node: n.Name, Summary: "A port vLLM binds is taken",
		Detail: fmt.Sprintf("Port %d on node %s (rank 0), where vLLM binds %s, is already taken: %s. vLLM would exit with "+
			"\"Address already in use\". Choose another %s, or stop what holds it.", port, n.Name, what, who, attr)}
}

// checkVersions is D28: vLLM on every node, new enough for this mode, and
// the same release everywhere (the ranks exchange pickled objects whose
// layout is the release's own).
func checkVersions(s Spec, seen map[string]Seen) []finding.Finding {
	var out []finding.Finding
	first, firstNode := "", ""
	for _, n := range s.Nodes {
		sn, ok := seen[n.Name]
		if !ok {
			continue
		}
		v := sn.Facts.VLLMVersion
		if v == "" {
			out = append(out, finding.Finding{Rule: D28, Path: nodePath(n, ""), Node: n.Name, Summary: "vLLM is not installed on a node",
				Detail: fmt.Sprintf("Node %s has no vLLM where vllm_command points. Install vLLM %d.%d.%d or later there, the same "+
					"release as on the other nodes.", n.Name, MinVLLM[0], MinVLLM[1], MinVLLM[2])})
			continue
		}
		if pv, err := pyversion.Parse(v); err == nil && !pv.AtLeast(MinVLLM[:]...) {
			out = append(out, finding.Finding{Rule: D28, Path: nodePath(n, ""), Node: n.Name, Summary: "vLLM is too old for multi-node without Ray",
				Detail: fmt.Sprintf("vLLM %s on node %s has no --nnodes: its multiprocessing executor runs on one node only "+
					"(the multi-node flags arrived in vLLM %d.%d.%d, PR #23691). Upgrade vLLM on every node, or serve over Ray "+
					"(spark_ray_cluster and spark_vllm_deployment).", v, n.Name, MinVLLM[0], MinVLLM[1], MinVLLM[2])})
		}
		if first == "" {
			first, firstNode = v, n.Name
		} else if v != first {
			out = append(out, finding.Finding{Rule: D28, Path: nodePath(n, ""), Node: n.Name, Summary: "vLLM differs across nodes",
				Detail: fmt.Sprintf("vLLM %s on node %s, %s on node %s. The ranks exchange the release's own messages; install the "+
					"same vLLM on every node.", v, n.Name, first, firstNode)})
		}
	}
	return out
}

// checkFabric is D27: the node holds its fabric address, and the interface
// declared for it is up and carries that address (gloo and NCCL bind on it).
func checkFabric(n Node, sn Seen) []finding.Finding {
	var out []finding.Finding
	ip, err := netip.ParseAddr(n.NodeIP)
	if err == nil && !sn.Facts.HasAddress(ip) {
		out = append(out, finding.Finding{Rule: D27, Path: nodePath(n, "node_ip"), Node: n.Name, Summary: "node_ip is not on its node",
			Detail: fmt.Sprintf("node_ip %s is not bound on node %s (its addresses: %s). The other ranks would dial it and never get "+
				"an answer. Set node_ip to one of the node's fabric addresses.", n.NodeIP, n.Name, addressList(sn.Facts))})
	}
	if n.Interface == "" {
		return out
	}
	var iface *nodefacts.Interface
	for i := range sn.Facts.Interfaces {
		if sn.Facts.Interfaces[i].Name == n.Interface {
			iface = &sn.Facts.Interfaces[i]
		}
	}
	switch {
	case iface == nil:
		out = append(out, finding.Finding{Rule: D27, Path: nodePath(n, "interface"), Node: n.Name, Summary: "The fabric interface is missing on its node",
			Detail: fmt.Sprintf("interface %q does not exist on node %s (it has %s). gloo and NCCL would fail to find it "+
				"(GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME). Name this node's own fabric port: Sparks cabled on different ports "+
				"name them differently, and each node's interface is set on that node only.", n.Interface, n.Name, interfaceList(sn.Facts))})
	case !iface.Up:
		out = append(out, finding.Finding{Rule: D27, Path: nodePath(n, "interface"), Node: n.Name, Summary: "The fabric interface is down",
			Detail: fmt.Sprintf("interface %s on node %s is down. Bring the link up, or name the port that is cabled.", n.Interface, n.Name)})
	case err == nil && !carries(*iface, ip):
		out = append(out, finding.Finding{Rule: D27, Path: nodePath(n, "interface"), Node: n.Name, Summary: "The fabric interface does not carry node_ip",
			Detail: fmt.Sprintf("interface %s on node %s does not carry node_ip %s: gloo and NCCL would talk over another network than "+
				"the one the other ranks reach this node on. Name the interface that holds %s.", n.Interface, n.Name, n.NodeIP, n.NodeIP)})
	}
	return out
}

// checkRoute is D26 from a headless rank's side: it must reach the master
// address, and over the interface that holds its own fabric address.
func checkRoute(n Node, sn Seen, master string) []finding.Finding {
	r := sn.Facts.RouteTo
	if r == nil {
		return []finding.Finding{{Rule: D26, Path: finding.Attr("master_addr"), Node: n.Name, Summary: "No route to the master address",
			Detail: fmt.Sprintf("Node %s (rank %d) has no route to master_addr %s: it would wait for torch's store until vLLM's "+
				"timeout. Set master_addr to an address of rank 0 on a network node %s shares with it (its fabric address).",
				n.Name, n.Rank, master, n.Name)}}
	}
	fabric := interfaceOf(sn.Facts, n.NodeIP)
	if r.Gateway == "" && (fabric == "" || r.Dev == fabric) {
		return nil
	}
	via := "over " + r.Dev
	if r.Gateway != "" {
		via = "through gateway " + r.Gateway + " on " + r.Dev
	}
	return []finding.Finding{{Rule: D26, Warning: true, Path: finding.Attr("master_addr"), Node: n.Name,
		Summary: "The master address is reached off the fabric",
		Detail: fmt.Sprintf("Node %s (rank %d) reaches master_addr %s %s, not over %s, which holds its node_ip %s. It serves, but "+
			"the ranks' traffic takes the slower network. Set master_addr to rank 0's fabric address.", n.Name, n.Rank, master, via,
			orNone(fabric), n.NodeIP)}}
}

// checkPeers is D26 for the message queues: node n must reach every
// address of Peers(n), or vLLM's start hangs for good after the store's
// rendezvous succeeded.
func checkPeers(s Spec, n Node, sn Seen) []finding.Finding {
	var out []finding.Finding
	for _, o := range s.Nodes {
		if !slices.Contains(s.Peers(n), o.NodeIP) {
			continue
		}
		if r, read := sn.Routes[o.NodeIP]; read && r == nil {
			out = append(out, finding.Finding{Rule: D26, Path: nodePath(o, "node_ip"), Node: n.Name, Summary: "A node cannot reach another's fabric address",
				Detail: fmt.Sprintf("Node %s (rank %d) has no route to node_ip %s of node %s (rank %d). vLLM's ranks exchange the "+
					"scheduler's messages on each node's node_ip (VLLM_HOST_IP), and the start waits for that handshake with no "+
					"timeout: it would hang. Give both nodes addresses on the network they share (the fabric).",
					n.Name, n.Rank, o.NodeIP, o.Name, o.Rank)})
		}
	}
	return out
}

// interfaceOf is the interface holding ip on the node, "" none.
func interfaceOf(f nodefacts.Facts, ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	for _, i := range f.Interfaces {
		if carries(i, a) {
			return i.Name
		}
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "the interface"
	}
	return s
}

func carries(i nodefacts.Interface, ip netip.Addr) bool {
	for _, a := range i.Addresses {
		if a.Addr() == ip {
			return true
		}
	}
	return false
}

func addressList(f nodefacts.Facts) string {
	var as []string
	for _, i := range f.Interfaces {
		for _, a := range i.Addresses {
			if !a.Addr().IsLoopback() && !a.Addr().IsLinkLocalUnicast() {
				as = append(as, a.Addr().String()+" on "+i.Name)
			}
		}
	}
	if len(as) == 0 {
		return "none"
	}
	return strings.Join(as, ", ")
}

func interfaceList(f nodefacts.Facts) string {
	var ns []string
	for _, i := range f.Interfaces {
		if i.Name != "lo" {
			ns = append(ns, i.Name)
		}
	}
	return strings.Join(ns, ", ")
}

func size(b int64) string {
	if b == 0 {
		return "nothing (or it is not mounted)"
	}
	return strconv.FormatInt((b+(1<<20)-1)>>20, 10) + " MiB"
}
