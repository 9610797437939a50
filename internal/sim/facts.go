package sim

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
)

// The JSON shapes of `ip -j addr show` and `ip -j -4 route get`, with the
// fields iproute2 prints that the provider reads (and a few it does not,
// so the output looks like the real thing).
type ipLink struct {
	IfIndex   int      `json:"ifindex"`
	IfName    string   `json:"ifname"`
	Flags     []string `json:"flags"`
	MTU       int      `json:"mtu"`
	OperState string   `json:"operstate"`
	AddrInfo  []ipAddr `json:"addr_info"`
}

type ipAddr struct {
	Family    string `json:"family"`
	Local     string `json:"local"`
	PrefixLen int    `json:"prefixlen"`
	Scope     string `json:"scope"`
}

type ipRoute struct {
	Type    string   `json:"type,omitempty"`
	Dst     string   `json:"dst"`
	Gateway string   `json:"gateway,omitempty"`
	Dev     string   `json:"dev"`
	PrefSrc string   `json:"prefsrc"`
	Flags   []string `json:"flags"`
}

// arg is positional parameter k ($1 is args[0]); "" when not given.
func arg(args []string, k int) string {
	if k < 1 || k > len(args) {
		return ""
	}
	return args[k-1]
}

// facts answers nodefacts.Script on node i: $3 a route to look up, $4 a
// port whose listeners to list, $5 an ip:port to try a TCP connection to
// ($6, the vllm command, is not run: vLLM is in Ray's Python); $8 asks for
// Docker's version; $9 more addresses whose routes to look up.
func (m *Model) facts(i int, args []string) string {
	n := m.node(i)
	var b strings.Builder
	section := func(name, body string) { b.WriteString("@@" + name + "\n" + body + "\n") }
	section("hostname", n.Hostname)
	section("interfaces", jsonString(interfaces(n)))
	section("route", jsonString([]ipRoute{routeOf(n, "8.8.8.8")}))
	section("gpus", strconv.Itoa(n.GPUs))
	if to := arg(args, 3); to != "" {
		section("route_to", routeTo(n, to))
	}
	for _, peer := range strings.Fields(arg(args, 9)) {
		section("peer_route="+peer, routeTo(n, peer))
	}
	if port := arg(args, 4); port != "" {
		section("listeners", m.listeners(i, port))
	}
	if addr := arg(args, 5); addr != "" {
		section("tcp", m.tcpProbe(n, addr))
	}
	// A virtual environment with one ray and one vllm distribution: the
	// script reads their versions from the files (nodefacts.filesScript).
	section("read_from", "files")
	section("python", PythonVersion)
	section("ray", n.RayVersion)
	section("vllm", n.VLLMVersion)
	executor := ""
	if n.VLLMVersion != "" {
		executor = vllmExecutorSource
	}
	section("vllm_executor", executor)
	section("vllm_env", "") // no VLLM_* variable in the SSH session's environment
	if arg(args, 8) == nodefacts.ReadDocker {
		section("docker", "") // the host runtime: no Docker
	}
	b.WriteString("@@end\n")
	return b.String()
}

func interfaces(n Node) []ipLink {
	return []ipLink{
		{IfIndex: 1, IfName: "lo", Flags: []string{"LOOPBACK", "UP", "LOWER_UP"}, MTU: 65536, OperState: "UNKNOWN",
			AddrInfo: []ipAddr{{Family: "inet", Local: "127.0.0.1", PrefixLen: 8, Scope: "host"}}},
		{IfIndex: 2, IfName: fabricIf, Flags: []string{"BROADCAST", "MULTICAST", "UP", "LOWER_UP"}, MTU: 9000, OperState: "UP",
			AddrInfo: []ipAddr{{Family: "inet", Local: n.IP.String(), PrefixLen: fabricPrefix, Scope: "global"}}},
	}
}

// routeOf is the kernel's answer for dst: local for the node's own address,
// direct on the node's network, else through that network's gateway.
func routeOf(n Node, dst string) ipRoute {
	r := ipRoute{Dst: dst, Dev: fabricIf, PrefSrc: n.IP.String(), Flags: []string{}}
	ip, _ := netip.ParseAddr(dst)
	switch {
	case ip == n.IP:
		r.Type, r.Dev = "local", "lo"
	case !network(n.IP).Contains(ip):
		r.Gateway = gateway(n.IP)
	}
	return r
}

// routeTo is `ip -j -4 route get dst`: nothing when dst is not an IPv4
// address (ip fails, the script prints no route).
func routeTo(n Node, dst string) string {
	if ip, err := netip.ParseAddr(dst); err != nil || !ip.Is4() {
		return ""
	}
	return jsonString([]ipRoute{routeOf(n, dst)})
}

// listeners is `ss -Hltnp "sport = :port"`: the GCS server when this node
// is a head whose GCS listens on port, a vllm serve, or the program a test
// had hold it (HoldPort).
func (m *Model) listeners(i int, port string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rays[i]; r != nil && r.head && strconv.Itoa(r.gcsPort) == port {
		return fmt.Sprintf(`LISTEN 0 4096 0.0.0.0:%s 0.0.0.0:* users:(("gcs_server",pid=%d,fd=8))`, port, 2000+i)
	}
	p, err := strconv.Atoi(port)
	if v := m.vllmAt(i, p); v != nil && err == nil {
		return m.vllmListener(i, v)
	}
	if prog, ok := m.nodes[i].held[p]; ok && err == nil {
		return fmt.Sprintf(`LISTEN 0 511 0.0.0.0:%s 0.0.0.0:* users:(("%s",pid=%d,fd=6))`, port, prog, 3000+i)
	}
	return ""
}

// tcpProbe is the script's TCP connection attempt from node n: open where a
// GCS listens, unless n is cut off.
func (m *Model) tcpProbe(n Node, addr string) string {
	if n.firewalled {
		return "closed timed out"
	}
	if m.gcsUp(addr) {
		return "open"
	}
	return "closed Connection refused"
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the types here always marshal
	}
	return string(b)
}
