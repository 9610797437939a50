// Package fabric judges the link between two nodes on the addresses they
// use to talk (the fabric): each end's interface as the plan read it (link
// state, MTU, speed, RDMA devices), NCCL_IB_HCA against the ports' RDMA
// devices, and a measured throughput against the operator's floor. It also
// holds the throughput probe's scripts and the parser of what they print.
// Pure: running the probe is the caller's business.
package fabric

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
)

// End is one end of a link: a node, the address it uses, and the facts
// read on it.
type End struct {
	Node  string
	IP    string
	Facts nodefacts.Facts
}

// Port is the interface carrying the end's address; ok is false when no
// interface carries it (other rules refuse that).
func (e End) Port() (nodefacts.Interface, bool) {
	a, err := netip.ParseAddr(e.IP)
	if err != nil {
		return nodefacts.Interface{}, false
	}
	for _, i := range e.Facts.Interfaces {
		for _, p := range i.Addresses {
			if p.Addr() == a {
				return i, true
			}
		}
	}
	return nodefacts.Interface{}, false
}

// Problem is one thing found about a link.
type Problem struct {
	Warning bool
	Node    string // the end it is about
	// Down names the port found down ("" for other problems): a rule that
	// already refuses a declared interface that is down can skip it.
	Down    string
	Summary string
	Detail  string
}

// CheckPair judges the link between a and b (a the head or rank 0). env is
// what NCCL reads on the nodes (NCCL_IB_HCA).
//
//   - A port that is down carries nothing: an error.
//   - MTUs that differ are a warning, not a refusal: TCP (Ray's gRPC,
//     gloo, NCCL's socket transport) sends segments no larger than the
//     smaller end's MSS, and NCCL's IB/RoCE transport sets each queue
//     pair's path MTU to the smaller of the two ports' active MTUs (NCCL
//     src/transport/net_ib.cc, "Adjust the MTU"), so both serve, at the
//     smaller size; measured on the lab, a 9000/1500 pair copies over TCP
//     as a 1500/1500 one. A switch between them smaller than both ends is
//     what drops frames, and only a transfer shows it: the probe.
//   - Speeds that differ are a warning (the link runs at the slower).
//   - NCCL_IB_HCA that leaves out a port's RDMA device is a warning: NCCL's
//     IB transport then uses other ports, or falls back to sockets.
func CheckPair(a, b End, env map[string]string) []Problem {
	pa, okA := a.Port()
	pb, okB := b.Port()
	var out []Problem
	for _, e := range []struct {
		end  End
		port nodefacts.Interface
		ok   bool
	}{{a, pa, okA}, {b, pb, okB}} {
		if e.ok && !e.port.Up {
			out = append(out, Problem{Node: e.end.Node, Down: e.port.Name, Summary: "The fabric port is down",
				Detail: fmt.Sprintf("%s on node %s carries %s, the address the other nodes use to reach it, and is down: nothing crosses it. "+
					"Bring the link up (cable, `ip link set %s up`), or use another address.", e.port.Name, e.end.Node, e.end.IP, e.port.Name)})
		}
	}
	if !okA || !okB {
		return out
	}
	if pa.MTU != pb.MTU && pa.MTU > 0 && pb.MTU > 0 {
		out = append(out, Problem{Warning: true, Node: b.Node, Summary: "The two ends of the fabric have different MTUs",
			Detail: fmt.Sprintf("%s on %s has MTU %d, %s on %s has MTU %d. TCP and NCCL's RDMA transport both settle on the smaller (%d), "+
				"so it serves, without the larger frames the other end was set up for. Set the same MTU on both ends (9000 on a DGX Spark's "+
				"ConnectX-7 ports, with the switch between them allowing it).", pa.Name, a.Node, pa.MTU, pb.Name, b.Node, pb.MTU, min(pa.MTU, pb.MTU))})
	}
	if pa.SpeedMbps > 0 && pb.SpeedMbps > 0 && pa.SpeedMbps != pb.SpeedMbps {
		out = append(out, Problem{Warning: true, Node: b.Node, Summary: "The two ends of the fabric run at different speeds",
			Detail: fmt.Sprintf("%s on %s is up at %s, %s on %s at %s: the link carries at most the slower. Check the cable and both ports "+
				"(`ethtool`).", pa.Name, a.Node, Speed(pa.SpeedMbps), pb.Name, b.Node, Speed(pb.SpeedMbps))})
	}
	if hca, ok := env["NCCL_IB_HCA"]; ok {
		for _, e := range []struct {
			end  End
			port nodefacts.Interface
		}{{a, pa}, {b, pb}} {
			for _, d := range e.port.RDMA {
				if !HCAUses(hca, d) {
					out = append(out, Problem{Warning: true, Node: e.end.Node, Summary: "NCCL_IB_HCA leaves out the fabric port's RDMA device",
						Detail: fmt.Sprintf("NCCL_IB_HCA=%q does not select %s, the RDMA device of %s on %s, the port carrying %s. NCCL's IB transport "+
							"then uses other ports, or falls back to sockets, at a fraction of the link's rate. Name it in NCCL_IB_HCA (NCCL's "+
							"syntax: a prefix, =exact, ^ to exclude, :port), or leave NCCL_IB_HCA unset.", hca, d, e.port.Name, e.end.Node, e.end.IP)})
				}
			}
		}
	}
	return out
}

// HCAUses reports whether NCCL_IB_HCA selects the RDMA device dev, as NCCL
// reads the variable (NCCL's environment variable documentation,
// NCCL_IB_HCA): a comma-separated list of device names, each a prefix
// unless the list starts with "=" (exact names), the whole list an
// exclusion when it starts with "^"; ":<port>" after a name is a port
// (any port of dev counts here).
func HCAUses(hca, dev string) bool {
	list := strings.TrimSpace(hca)
	exclude := strings.HasPrefix(list, "^")
	list = strings.TrimPrefix(list, "^")
	exact := strings.HasPrefix(list, "=")
	list = strings.TrimPrefix(list, "=")
	matched := false
	for _, e := range strings.Split(list, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(e), ":")
		if name == "" {
			continue
		}
		if name == dev || (!exact && strings.HasPrefix(dev, name)) {
			matched = true
		}
	}
	return matched != exclude
}

// Speed is a link speed for messages: "200 Gb/s", "10 Gb/s", "100 Mb/s".
func Speed(mbps int) string {
	if mbps >= 1000 && mbps%1000 == 0 {
		return fmt.Sprintf("%d Gb/s", mbps/1000)
	}
	return fmt.Sprintf("%d Mb/s", mbps)
}
