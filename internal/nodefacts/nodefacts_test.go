package nodefacts

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const sparkOutput = `@@hostname
spark1
@@interfaces
[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"mtu":65536,"operstate":"UNKNOWN","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},{"ifindex":12,"ifname":"enp1s0f1np1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":9000,"operstate":"UP","addr_info":[{"family":"inet","local":"192.168.200.12","prefixlen":24},{"family":"inet6","local":"fe80::1","prefixlen":64}]},{"ifindex":3,"ifname":"enP7s7","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500,"operstate":"UP","addr_info":[{"family":"inet","local":"10.1.230.180","prefixlen":16}]},{"ifindex":4,"ifname":"wlP9s9","flags":["BROADCAST","MULTICAST"],"mtu":1500,"operstate":"DOWN","addr_info":[]}]
@@route
[{"dst":"8.8.8.8","gateway":"10.1.0.1","dev":"enP7s7","prefsrc":"10.1.230.180","flags":[],"uid":0,"cache":[]}]
@@gpus
1
@@python
3.12.3
@@ray
2.52.1
@@vllm
0.33.0
@@docker
Docker version 28.2.2, build e6534b4
@@end
`

func TestParseSpark(t *testing.T) {
	f, err := Parse(sparkOutput)
	if err != nil {
		t.Fatal(err)
	}
	if f.Hostname != "spark1" || f.DefaultRouteIP != "10.1.230.180" || f.GPUCount != 1 {
		t.Fatalf("hostname/route/gpus = %q %q %d", f.Hostname, f.DefaultRouteIP, f.GPUCount)
	}
	if f.PythonVersion != "3.12.3" || f.RayVersion != "2.52.1" || f.VLLMVersion != "0.33.0" || f.DockerVersion != "28.2.2" {
		t.Fatalf("versions = %q %q %q %q", f.PythonVersion, f.RayVersion, f.VLLMVersion, f.DockerVersion)
	}
	names := []string{}
	for _, i := range f.Interfaces {
		names = append(names, i.Name)
	}
	if strings.Join(names, ",") != "enP7s7,enp1s0f1np1,lo,wlP9s9" {
		t.Fatalf("interfaces = %v", names)
	}
	fabric := f.Interfaces[1]
	if fabric.MTU != 9000 || !fabric.Up || len(fabric.Addresses) != 2 || fabric.Addresses[0].String() != "192.168.200.12/24" {
		t.Fatalf("fabric interface = %+v", fabric)
	}
	if f.Interfaces[3].Up {
		t.Fatal("an interface without the UP flag is reported up")
	}
	if !f.HasAddress(netip.MustParseAddr("192.168.200.12")) || f.HasAddress(netip.MustParseAddr("192.168.200.13")) {
		t.Fatal("HasAddress disagrees with the interface table")
	}
}

func TestParseBareNode(t *testing.T) {
	// No default route, no GPUs, no Ray, no vLLM, no Docker: all absent, no error.
	out := "@@hostname\nbox\n@@interfaces\n[{\"ifname\":\"lo\",\"flags\":[\"UP\"],\"mtu\":65536,\"addr_info\":[]}]\n@@route\n@@gpus\n0\n@@python\n@@ray\n@@vllm\n@@docker\n@@end\n"
	f, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.DefaultRouteIP != "" || f.GPUCount != 0 || f.RayVersion != "" || f.VLLMVersion != "" || f.DockerVersion != "" || f.PythonVersion != "" {
		t.Fatalf("absent facts reported as present: %+v", f)
	}
}

func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		"truncated":     "@@hostname\nbox\n@@interfaces\n[]\n",
		"no ip command": "@@hostname\nbox\n@@interfaces\n@@end\n",
		"bad json":      "@@interfaces\n[{\n@@end\n",
		"bad gpu count": "@@interfaces\n[]\n@@gpus\nNVIDIA-SMI has failed\n@@end\n",
	}
	for name, out := range cases {
		if _, err := Parse(out); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestVersion(t *testing.T) {
	for in, want := range map[string]string{
		"2.52.1":                "2.52.1",
		"ray, version 2.52.1\n": "2.52.1",
		"Docker version 20.10.24+dfsg1, build 297e128": "20.10.24+dfsg1",
		"":                  "",
		"command not found": "",
	} {
		if got := version(in); got != want {
			t.Errorf("version(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestScriptOnThisMachine runs the real script with the local /bin/sh and
// iproute2, and a fake ray whose #! line names this machine's Python.
func TestScriptOnThisMachine(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2 not installed on this machine")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed on this machine")
	}
	dir := t.TempDir()
	fakeRay := filepath.Join(dir, "ray")
	if err := os.WriteFile(fakeRay, []byte("#!"+py+"\nprint('ray, version 9.9.9')\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", "-c", Script, "sh", fakeRay).Output()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(string(out))
	if err != nil {
		t.Fatal(err)
	}
	if !f.HasAddress(netip.MustParseAddr("127.0.0.1")) {
		t.Fatalf("loopback address missing from %+v", f.Interfaces)
	}
	if f.RayVersion != "9.9.9" {
		t.Fatalf("ray version = %q: the fallback to `ray --version` failed", f.RayVersion)
	}
	if f.PythonVersion == "" {
		t.Fatal("python version of ray's interpreter not found")
	}
}

// TestScriptTCPProbe runs the script's TCP probe (a worker trying the head's
// GCS port) against a port that listens and one that does not, on this
// machine's loopback.
func TestScriptTCPProbe(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed on this machine")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := l.Addr().String()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	defer l.Close()
	for addr, want := range map[string]string{open: "open", closedAddr: "closed Connection refused"} {
		out, err := exec.Command("/bin/sh", "-c", Script, "sh", "ray", py, "", "", addr).Output()
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(string(out))
		if err != nil {
			t.Fatal(err)
		}
		if f.TCP != want {
			t.Errorf("probe of %s: tcp = %q, want %q", addr, f.TCP, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(sparkOutput)
	f.Add("@@end\n")
	f.Add("@@interfaces\n[{\"addr_info\":[{\"family\":\"inet\",\"local\":\"1.2.3.4\",\"prefixlen\":99}]}]\n@@end")
	f.Fuzz(func(t *testing.T, out string) {
		fa, err := Parse(out)
		if err != nil {
			return
		}
		for _, i := range fa.Interfaces {
			for _, a := range i.Addresses {
				if !a.IsValid() {
					t.Fatalf("invalid prefix accepted: %v", a)
				}
			}
		}
	})
}

func TestParseClusterProbes(t *testing.T) {
	out := "@@interfaces\n[]\n@@gpus\nnone\n" +
		"@@route_to\n[{\"dst\":\"192.168.200.12\",\"gateway\":\"10.1.0.1\",\"dev\":\"enP7s7\",\"prefsrc\":\"10.1.230.181\"}]\n" +
		"@@listeners\nLISTEN 0 4096 0.0.0.0:6379 0.0.0.0:* users:((\"gcs_server\",pid=12,fd=8))\nLISTEN 0 4096 [::]:6379 [::]:* users:((\"gcs_server\",pid=12,fd=9))\n" +
		"@@tcp\nclosed Connection refused\n@@end\n"
	f, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.HasNvidiaSMI || f.GPUCount != 0 {
		t.Fatal("no nvidia-smi reported as present")
	}
	if f.RouteTo == nil || f.RouteTo.Gateway != "10.1.0.1" || f.RouteTo.Src != "10.1.230.181" || f.RouteTo.Dev != "enP7s7" {
		t.Fatalf("route = %+v", f.RouteTo)
	}
	if strings.Join(f.Listeners, ",") != "gcs_server" || f.TCP != "closed Connection refused" {
		t.Fatalf("listeners %v tcp %q", f.Listeners, f.TCP)
	}
}

// The head's routes to its workers ($9): one section per address asked
// for, nil for an address the kernel has no route to, nothing for one not
// asked for. The script itself runs here, on this machine's own routes.
func TestPeerRoutes(t *testing.T) {
	out := "@@interfaces\n[]\n@@gpus\nnone\n" +
		"@@peer_route=192.168.200.13\n[{\"dst\":\"192.168.200.13\",\"dev\":\"enp1s0f1np1\",\"prefsrc\":\"192.168.200.12\"}]\n" +
		"@@peer_route=10.9.0.7\n[{\"dst\":\"10.9.0.7\",\"gateway\":\"10.1.0.1\",\"dev\":\"enP7s7\",\"prefsrc\":\"10.1.230.180\"}]\n" +
		"@@peer_route=172.31.0.9\n@@end\n"
	f, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if r := f.PeerRoutes["192.168.200.13"]; r == nil || r.Gateway != "" || r.Dev != "enp1s0f1np1" {
		t.Errorf("direct route: %+v", r)
	}
	if r := f.PeerRoutes["10.9.0.7"]; r == nil || r.Gateway != "10.1.0.1" {
		t.Errorf("route through a gateway: %+v", r)
	}
	if r, asked := f.PeerRoutes["172.31.0.9"]; !asked || r != nil {
		t.Errorf("no route: %+v (asked: %v)", r, asked)
	}
	if len(f.PeerRoutes) != 3 {
		t.Errorf("routes read: %v", f.PeerRoutes)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no iproute2 on this machine to run the script's lookups")
	}
	got, err := exec.Command("/bin/sh", "-c", Script, "sh", "ray", "", "", "", "", "", "", "", "127.0.0.1").Output()
	if err != nil {
		t.Fatal(err)
	}
	if f, err = Parse(string(got)); err != nil {
		t.Fatal(err)
	}
	if r := f.PeerRoutes["127.0.0.1"]; r == nil || r.Dev != "lo" || len(f.PeerRoutes) != 1 {
		t.Errorf("the script's route to 127.0.0.1: %+v (%v)", r, f.PeerRoutes)
	}
}

// TestScriptReadsVLLMExecutorFromSource runs the script's source reading
// against vLLM packages laid out as the releases ship them (the envs.py
// entry is written exactly as vLLM 0.20.0 and 0.21.0-0.32.0 write it,
// vllm/envs.py L777-779 and L786-788; 0.33.0 has no entry and keeps
// vllm/v1/executor/ray_executor_v2.py; 0.19.1 has neither), found through
// PYTHONPATH by this machine's Python, without importing them.
func TestScriptReadsVLLMExecutorFromSource(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed on this machine")
	}
	entry := func(def string) string {
		return "environment_variables = {\n    \"VLLM_USE_RAY_V2_EXECUTOR_BACKEND\": lambda: bool(\n        int(os.getenv(\"VLLM_USE_RAY_V2_EXECUTOR_BACKEND\", \"" +
			def + "\"))\n    ),\n}\n"
	}
	for _, c := range []struct {
		name, envs string
		v2File     bool
		want       string
	}{
		{"0.20.0", entry("0"), true, "flag=0"},
		{"0.32.0", entry("1"), true, "flag=1"},
		{"0.33.0", "environment_variables = {}\n", true, "v2-only"},
		{"0.19.1", "environment_variables = {}\n", false, "legacy-only"},
		{"unparsable default", entry("yes"), true, ""},
	} {
		dir := t.TempDir()
		pkg := filepath.Join(dir, "vllm")
		if err := os.MkdirAll(filepath.Join(pkg, "v1", "executor"), 0o755); err != nil {
			t.Fatal(err)
		}
		// Importing the package would fail the probe: the script must not.
		files := map[string]string{"__init__.py": "raise SystemExit('imported')\n", "envs.py": c.envs}
		if c.v2File {
			files[filepath.Join("v1", "executor", "ray_executor_v2.py")] = ""
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(pkg, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("/bin/sh", "-c", Script, "sh", "ray", py)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(string(out))
		if err != nil {
			t.Fatal(err)
		}
		if f.VLLMExecutorSource != c.want {
			t.Errorf("%s: executor source = %q, want %q", c.name, f.VLLMExecutorSource, c.want)
		}
	}
}

func TestParseGPUs(t *testing.T) {
	for _, c := range []struct {
		in      string
		has     bool
		count   int
		wantErr bool
	}{
		{"", false, 0, false},
		{"none", false, 0, false},
		{"0", true, 0, false},
		{"2", true, 2, false},
		{"-1", false, 0, true},
		{"NVIDIA-SMI has failed", false, 0, true},
	} {
		has, count, err := parseGPUs(c.in)
		if has != c.has || count != c.count || (err != nil) != c.wantErr {
			t.Errorf("parseGPUs(%q) = %v %d %v, want %v %d error=%v", c.in, has, count, err, c.has, c.count, c.wantErr)
		}
	}
}

func TestDefaultRouteIP(t *testing.T) {
	for _, c := range []struct {
		in, want string
		wantErr  bool
	}{
		{"", "", false},
		{"[]", "", false},
		{`[{"dst":"8.8.8.8","prefsrc":"10.1.230.180"}]`, "10.1.230.180", false},
		{`[{"dst":"8.8.8.8","prefsrc":"not an address"}]`, "", false},
		{"[{", "", true},
	} {
		got, err := parseDefaultRouteIP(c.in)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("parseDefaultRouteIP(%q) = %q %v, want %q error=%v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func TestInterfaceOfSkipsUnusableAddresses(t *testing.T) {
	var l ipAddr
	raw := `{"ifname":"eth0","mtu":1500,"flags":["BROADCAST"],"addr_info":[` +
		`{"family":"inet","local":"10.0.0.5","prefixlen":24},` +
		`{"family":"inet","local":"garbage","prefixlen":24},` +
		`{"family":"inet","local":"10.0.0.6","prefixlen":99},` +
		`{"family":"link","local":"10.0.0.7","prefixlen":24}]}`
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		t.Fatal(err)
	}
	i := interfaceOf(l)
	if i.Name != "eth0" || i.MTU != 1500 || i.Up || len(i.Addresses) != 1 || i.Addresses[0].String() != "10.0.0.5/24" {
		t.Fatalf("interfaceOf = %+v", i)
	}
}

func TestExecutorSourceKeepsOnlyKnownValues(t *testing.T) {
	for in, want := range map[string]string{
		"flag=0": "flag=0", "flag=1": "flag=1", "v2-only": "v2-only", "legacy-only": "legacy-only",
		"": "", "flag=2": "", "Traceback (most recent call last):": "",
	} {
		if got := executorSource(in); got != want {
			t.Errorf("executorSource(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVLLMEnv(t *testing.T) {
	if env := vllmEnv(""); env != nil {
		t.Fatalf("no assignments gave %v, want nil", env)
	}
	env := vllmEnv("VLLM_HOST_IP=10.0.0.5\nPATH=/bin\nVLLM_USE_RAY_V2_EXECUTOR_BACKEND=1\nnot an assignment")
	if len(env) != 2 || env["VLLM_HOST_IP"] != "10.0.0.5" || env["VLLM_USE_RAY_V2_EXECUTOR_BACKEND"] != "1" {
		t.Fatalf("vllmEnv = %v", env)
	}
}

// The memory sections as a lab node prints them (NUMA node 0's meminfo, no
// cgroup limit), a cgroup-limited container, and nvidia-smi's figures (a
// GB10 reports none).
func TestParseMemory(t *testing.T) {
	node := "Node 0 MemTotal:       24731408 kB\nNode 0 MemFree:        11564384 kB\nNode 0 MemUsed:        13167024 kB\n" +
		"Node 0 Active(file):    4981308 kB\nNode 0 Inactive(file):  6967500 kB\nNode 0 SReclaimable:     943348 kB\nCgroupLimit: max B\nCgroupUsage: 5 B"
	m := parseMemory(node, "")
	if m.Total != 24731408<<10 || m.Available != (11564384+4981308+6967500+943348)<<10 || m.GPUs != nil {
		t.Fatalf("%+v", m)
	}
	limited := "MemTotal: 1000 kB\nMemFree: 800 kB\nCgroupLimit: 512000 B\nCgroupUsage: 412000 B"
	if m := parseMemory(limited, ""); m.Total != 512000 || m.Available != 100000 {
		t.Fatalf("cgroup: %+v", m)
	}
	m = parseMemory(node, "81559, 80000\n[N/A], [N/A]\n")
	if len(m.GPUs) != 2 || m.GPUs[0] != (GPUMemory{Total: 81559 << 20, Free: 80000 << 20}) || m.GPUs[1] != (GPUMemory{}) {
		t.Fatalf("gpus: %+v", m.GPUs)
	}
}

// The links section: a DGX Spark's ConnectX-7 port (200 Gb/s, its RDMA
// device), a lab veth (10000, none), a virtual device with no speed.
func TestAddLinks(t *testing.T) {
	ifs := []Interface{{Name: "enp1s0f0np0"}, {Name: "eth1"}, {Name: "lo"}}
	addLinks(ifs, "enp1s0f0np0 200000 rocep1s0f0,\neth1 10000 \nlo -1 \nghost 1000 mlx5_9,")
	if ifs[0].SpeedMbps != 200000 || len(ifs[0].RDMA) != 1 || ifs[0].RDMA[0] != "rocep1s0f0" ||
		ifs[1].SpeedMbps != 10000 || ifs[1].RDMA != nil || ifs[2].SpeedMbps != 0 {
		t.Fatalf("%+v", ifs)
	}
}
