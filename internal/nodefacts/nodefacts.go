// Package nodefacts gathers what a node is — interfaces, the address the
// default route would use, GPUs, Ray/Python/vLLM/Docker versions — in one
// remote script, and parses its output. Parsing is pure so it can be
// table-tested and fuzzed; running the script is the caller's business.
package nodefacts

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// Script prints one "@@name" section per fact. Positional parameters:
// $1 the ray command (default "ray"); $2 the Python that runs Ray (default:
// the interpreter on ray's #! line, else python3); $3 an address to look up
// the route to (a worker's route to its head), optional; $4 a TCP port whose
// listeners to list (the GCS port), optional; $5 an ip:port to try a TCP
// connection to (the head's GCS, from a worker), optional; $6 the vllm
// command (default "vllm"), asked for its version when Ray's Python has no
// vllm distribution; $7 "python" reads what Python knows with Python even
// where the files say it (the lab's differential test); $8 "docker" reads
// the Docker client's version too (ReadDocker); $9 addresses (space-
// separated) whose routes to look up too (the head's routes to its workers),
// optional. Every probe tolerates absence: a box without Ray or GPUs is
// still described.
//
// The default-route address is read with `ip route get`, a routing-table
// lookup: no packet leaves the node, exactly as Ray's and vLLM's own
// detection (a UDP connect to 8.8.8.8) sends none.
const Script = `ray=${1:-ray}
py=${2:-}
if [ -z "$py" ]; then
` + ray.PythonOfRay + `
fi
echo @@hostname; cat /proc/sys/kernel/hostname 2>/dev/null || hostname
echo @@interfaces; ip -j addr show 2>/dev/null
echo @@links; for d in /sys/class/net/*; do echo "${d##*/} $(cat "$d/speed" 2>/dev/null || echo 0) $(ls "$d/device/infiniband" 2>/dev/null | tr '\n' ',')"; done
echo @@route; ip -j -4 route get 8.8.8.8 2>/dev/null
echo @@gpus; if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L 2>/dev/null | grep -c '^GPU'; else echo none; fi
if [ -n "${3:-}" ]; then echo @@route_to; ip -j -4 route get "$3" 2>/dev/null; fi
for a in ${9:-}; do echo "@@peer_route=$a"; ip -j -4 route get "$a" 2>/dev/null; done
if [ -n "${4:-}" ]; then echo @@listeners; ss -Hltnp "sport = :$4" 2>/dev/null; fi
pyver= rayver= vllmver= vllmexec= tcp=
` + filesScript + `
if [ -z "$read_from_files" ]; then
# One Python start for every fact Python knows (each start costs tens of
# milliseconds of CPU, and a plan reads every node): its version, the Ray
# and vLLM distributions, and the TCP probe. It prints shell assignments,
# each value quoted by shlex.
eval "$("$py" -c 'import platform, shlex, sys
from importlib.metadata import version
out = {"pyver": platform.python_version()}
for var, dist in (("rayver", "ray"), ("vllmver", "vllm")):
    try:
        out[var] = version(dist)
    except Exception:
        pass
# Which Ray executors the vLLM build has, from its own source, without
# importing vLLM (seconds of torch): the default of the executor variable
# in vllm/envs.py, else whether RayExecutorV2 exists.
try:
    import importlib.util, os, re
    d = os.path.dirname(importlib.util.find_spec("vllm").origin)
    # vllm/envs.py; vllm/foundation/system/envs.py on the main branch after 0.34.0.
    envs = [p for p in (os.path.join(d, "envs.py"), os.path.join(d, "foundation", "system", "envs.py")) if os.path.exists(p)]
    src = open(envs[0]).read() if envs else ""
    at = src.find("\"VLLM_USE_RAY_V2_EXECUTOR_BACKEND\":")
    if at >= 0:
        m = re.search(r"getenv\(\s*\"VLLM_USE_RAY_V2_EXECUTOR_BACKEND\"\s*,\s*\"([01])\"\s*\)", src[at:at + 400])
        if m:
            out["vllmexec"] = "flag=" + m.group(1)
    elif os.path.exists(os.path.join(d, "v1", "executor", "ray_executor_v2.py")):
        out["vllmexec"] = "v2-only"
    else:
        out["vllmexec"] = "legacy-only"
except Exception:
    pass
if sys.argv[1]:
    import socket
    h, p = sys.argv[1].rsplit(":", 1)
    try:
        socket.create_connection((h, int(p)), timeout=3).close()
        out["tcp"] = "open"
    except socket.timeout:
        out["tcp"] = "timeout"
    except OSError as e:
        out["tcp"] = "closed %s" % e.strerror
print(" ".join("%s=%s" % (k, shlex.quote(v)) for k, v in out.items()))' "${5:-}" 2>/dev/null)"
fi
if [ -n "${5:-}" ]; then echo @@tcp; echo "${tcp:-unknown}"; fi
echo @@read_from; if [ -n "$read_from_files" ]; then echo files; else echo python; fi
echo @@python; [ -z "$pyver" ] || echo "$pyver"
echo @@ray; if [ -n "$rayver" ]; then echo "$rayver"; else "$ray" --version 2>/dev/null; fi
# The vllm command is asked only when Ray's Python could not say (no
# interpreter found), or when the caller names the command that serves ($6):
# a vllm elsewhere on PATH is another environment's, which Ray's workers do
# not import, and its --version imports torch (7 s on a lab node).
echo @@vllm; if [ -n "$vllmver" ]; then echo "$vllmver"; elif [ -n "${6:-}" ] || [ -z "$pyver" ]; then "${6:-vllm}" --version 2>/dev/null; fi
echo @@vllm_executor; echo "$vllmexec"
echo @@vllm_env; env | grep -E '^(VLLM_HOST_IP|VLLM_USE_RAY_V2_EXECUTOR_BACKEND)=' || true
if [ "${8:-}" = docker ]; then echo @@docker; docker --version 2>/dev/null; fi
` + memoryScript + `echo @@end
`

// ReadDocker, as Script's $8, reads the Docker client's version. Only the
// spark_node data source reports it: `docker --version` is a Go binary's
// start, about 17 ms of CPU on a lab node, a third of the script's, which
// every node of every cluster plan would pay for a fact no rule uses.
const ReadDocker = "docker"

// Interface is one network interface and its IPv4/IPv6 addresses.
type Interface struct {
	Name      string
	Addresses []netip.Prefix // address/prefix, as `ip addr` shows them
	MTU       int
	Up        bool
	// SpeedMbps is the link's negotiated speed (sysfs speed); 0 unknown
	// (a virtual device, or a link down).
	SpeedMbps int
	// RDMA names the RDMA devices on this port (sysfs device/infiniband),
	// as NCCL_IB_HCA names them ("mlx5_0"); nil none.
	RDMA []string
}

// Facts describe one node.
type Facts struct {
	Hostname       string
	Interfaces     []Interface
	DefaultRouteIP string // "" when the node has no default route
	GPUCount       int
	HasNvidiaSMI   bool   // GPUCount is only meaningful when true
	RouteTo        *Route // route to the address given as $3; nil when not asked or no route
	// PeerRoutes are the routes to the addresses given as $9: an address
	// asked for and unreachable maps to nil; one not asked for is absent.
	PeerRoutes map[string]*Route
	Listeners  []string // processes listening on the port given as $4 (e.g. "gcs_server")
	TCP        string   // "open", "closed …", "timeout" for the ip:port given as $5
	// ReadFromFiles: what Python knows (its version, Ray's and vLLM's, the
	// executor, the TCP probe) was read from the files, no Python started
	// (filesScript).
	ReadFromFiles bool
	PythonVersion string // "" when absent
	RayVersion    string
	VLLMVersion   string
	// VLLMExecutorSource is what the vLLM build's own source says of its
	// Ray executors (preflight.Source* values: "flag=0", "flag=1",
	// "v2-only", "legacy-only"); "" when it could not be read.
	VLLMExecutorSource string
	// VLLMEnv holds VLLM_HOST_IP and VLLM_USE_RAY_V2_EXECUTOR_BACKEND where
	// they are already set in the environment a command inherits on the node
	// (a profile, the container image): vllm serve inherits them too.
	VLLMEnv       map[string]string
	DockerVersion string // "" when Docker is absent, or not asked for (ReadDocker)
	Memory        Memory
}

// HasAddress reports whether ip is bound to any interface on the node.
func (f *Facts) HasAddress(ip netip.Addr) bool {
	for _, i := range f.Interfaces {
		for _, a := range i.Addresses {
			if a.Addr() == ip {
				return true
			}
		}
	}
	return false
}

// sections splits the script's output into named sections.
func sections(out string) map[string]string {
	s := map[string]string{}
	name := ""
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(line, "@@"); ok && n != "" && !strings.ContainsAny(n, " \t") {
			if name != "" {
				s[name] = strings.TrimSpace(b.String())
			}
			name = n
			b.Reset()
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	if name != "" {
		s[name] = strings.TrimSpace(b.String())
	}
	return s
}

type ipAddr struct {
	IfName   string   `json:"ifname"`
	MTU      int      `json:"mtu"`
	Flags    []string `json:"flags"`
	AddrInfo []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

type ipRoute struct {
	Dst     string `json:"dst"`
	Gateway string `json:"gateway"`
	Dev     string `json:"dev"`
	PrefSrc string `json:"prefsrc"`
}

// Route is the kernel's answer to "how would you reach this address".
type Route struct {
	Dst     string
	Gateway string // "" when the destination is on a directly connected network
	Dev     string
	Src     string
}

// Parse reads Script's output.
func Parse(out string) (Facts, error) {
	s := sections(out)
	if _, ok := s["end"]; !ok {
		return Facts{}, fmt.Errorf("node facts output is truncated (no end marker): %q", tail(out))
	}
	f := Facts{Hostname: s["hostname"]}
	var err error
	if f.Interfaces, err = parseInterfaces(s["interfaces"]); err != nil {
		return Facts{}, err
	}
	addLinks(f.Interfaces, s["links"])
	if f.DefaultRouteIP, err = parseDefaultRouteIP(s["route"]); err != nil {
		return Facts{}, err
	}
	if f.RouteTo, err = parseRouteTo(s["route_to"]); err != nil {
		return Facts{}, err
	}
	for name, raw := range s {
		if addr, ok := strings.CutPrefix(name, "peer_route="); ok {
			r, err := parseRouteTo(raw)
			if err != nil {
				return Facts{}, fmt.Errorf("route to %s: %w", addr, err)
			}
			if r != nil && r.Dev == "" {
				r = nil // unreachable, prohibited: no route
			}
			if f.PeerRoutes == nil {
				f.PeerRoutes = map[string]*Route{}
			}
			f.PeerRoutes[addr] = r
		}
	}
	f.Listeners = listeners(s["listeners"])
	f.TCP = s["tcp"]
	f.ReadFromFiles = s["read_from"] == "files"
	if f.HasNvidiaSMI, f.GPUCount, err = parseGPUs(s["gpus"]); err != nil {
		return Facts{}, err
	}
	f.PythonVersion = version(s["python"])
	f.RayVersion = version(s["ray"])
	f.VLLMVersion = version(s["vllm"])
	f.VLLMExecutorSource = executorSource(s["vllm_executor"])
	f.VLLMEnv = vllmEnv(s["vllm_env"])
	f.DockerVersion = strings.TrimSuffix(version(s["docker"]), ",")
	f.Memory = parseMemory(s["memory"], s["gpu_memory"])
	return f, nil
}

// parseInterfaces reads `ip -j addr show`, sorted by interface name. Every
// node has at least loopback, so no output means no iproute2.
func parseInterfaces(raw string) ([]Interface, error) {
	if raw == "" {
		return nil, fmt.Errorf("the node printed no interfaces: is iproute2 (`ip`) installed?")
	}
	var links []ipAddr
	if err := json.Unmarshal([]byte(raw), &links); err != nil {
		return nil, fmt.Errorf("parse `ip -j addr` output: %w", err)
	}
	var out []Interface
	for _, l := range links {
		out = append(out, interfaceOf(l))
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// interfaceOf keeps a link's IPv4 and IPv6 addresses, skipping any whose
// address or prefix length does not parse.
func interfaceOf(l ipAddr) Interface {
	i := Interface{Name: l.IfName, MTU: l.MTU, Up: slices.Contains(l.Flags, "UP")}
	for _, a := range l.AddrInfo {
		ip, err := netip.ParseAddr(a.Local)
		if err != nil || (a.Family != "inet" && a.Family != "inet6") {
			continue
		}
		p, err := ip.Prefix(a.PrefixLen)
		if err != nil {
			continue
		}
		i.Addresses = append(i.Addresses, netip.PrefixFrom(ip, p.Bits()))
	}
	return i
}

// parseRoutes reads `ip -j route get`; no output (no route) is no routes.
func parseRoutes(raw string) ([]ipRoute, error) {
	if raw == "" {
		return nil, nil
	}
	var routes []ipRoute
	if err := json.Unmarshal([]byte(raw), &routes); err != nil {
		return nil, fmt.Errorf("parse `ip -j route get` output: %w", err)
	}
	return routes, nil
}

// parseDefaultRouteIP is the source address of the default route, "" when
// there is none or it names no valid address.
func parseDefaultRouteIP(raw string) (string, error) {
	routes, err := parseRoutes(raw)
	if err != nil || len(routes) == 0 {
		return "", err
	}
	if ip, err := netip.ParseAddr(routes[0].PrefSrc); err == nil {
		return ip.String(), nil
	}
	return "", nil
}

// parseRouteTo is the route to the address the script was given, nil when
// it was given none or the node has no route there.
func parseRouteTo(raw string) (*Route, error) {
	routes, err := parseRoutes(raw)
	if err != nil || len(routes) == 0 {
		return nil, err
	}
	r := routes[0]
	return &Route{Dst: r.Dst, Gateway: r.Gateway, Dev: r.Dev, Src: r.PrefSrc}, nil
}

// parseGPUs reads the gpus section: "none" (or nothing) when nvidia-smi is
// absent, else the number of GPUs it listed.
func parseGPUs(g string) (hasNvidiaSMI bool, count int, err error) {
	if g == "" || g == "none" {
		return false, 0, nil
	}
	n, err := strconv.Atoi(g)
	if err != nil || n < 0 {
		return false, 0, fmt.Errorf("GPU count %q is not a number", g)
	}
	return true, n, nil
}

// executorSource keeps only the values the script's Python can print, so a
// stray line never passes for what the vLLM source says.
func executorSource(x string) string {
	switch x {
	case "flag=0", "flag=1", "v2-only", "legacy-only":
		return x
	}
	return ""
}

// vllmEnv reads the VLLM_* assignments `env` printed; nil when none.
func vllmEnv(raw string) map[string]string {
	var env map[string]string
	for _, line := range strings.Split(raw, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.HasPrefix(k, "VLLM_") {
			if env == nil {
				env = map[string]string{}
			}
			env[k] = v
		}
	}
	return env
}

// listeners pulls process names out of `ss -Hltnp` lines such as
// `LISTEN 0 4096 0.0.0.0:6379 0.0.0.0:* users:(("gcs_server",pid=12,fd=8))`.
func listeners(raw string) []string {
	var out []string
	seen := map[string]bool{}
	for _, line := range strings.Split(raw, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		// ss names only the SSH user's own processes (root sees all).
		name := "a process of another user"
		if i := strings.Index(line, `(("`); i >= 0 {
			if j := strings.Index(line[i+3:], `"`); j >= 0 {
				name = line[i+3 : i+3+j]
			}
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// version pulls the version out of "2.52.1", "ray, version 2.52.1" or
// "Docker version 20.10.24+dfsg1, build 297e128": the first token that
// starts with a digit.
func version(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	for _, tok := range strings.Fields(line) {
		if tok[0] >= '0' && tok[0] <= '9' {
			return strings.TrimSuffix(tok, ",")
		}
	}
	return ""
}

func tail(s string) string {
	if len(s) > 200 {
		return "…" + s[len(s)-200:]
	}
	return s
}
