package preflight

import (
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// fieldReportDeployment is the field report's head with vLLM 0.32.0 and a
// live cluster: Ray registered the head's external address. host_ip is the
// registered address, so the plan is clean until a case breaks one thing.
func fieldReportDeployment() Deployment {
	f := spark("10.1.230.180", "192.168.200.12")
	f.VLLMVersion = "0.32.0+cpu"
	return Deployment{HeadFacts: f, HeadName: "head", SSHHost: "10.1.230.180", HeadIP: "10.1.230.180", HostIP: "10.1.230.180",
		Env: map[string]string{}, Table: fieldReportTable(), Sizes: Sizes{TP: 1, PP: 1}}
}

func allSummaries(ds []finding.Finding) string {
	var out []string
	for _, d := range ds {
		kind := "error"
		if d.Warning {
			kind = "warning"
		}
		out = append(out, kind+": "+d.Summary)
	}
	return strings.Join(out, " | ")
}

func TestCheckDeploymentClean(t *testing.T) {
	c, found := CheckDeployment(fieldReportDeployment())
	if len(found) != 0 {
		t.Fatalf("clean deployment flagged: %s", allSummaries(found))
	}
	if c.Executor.Name != ExecutorV2 || c.Executor.Pinned || c.PlacementIP != "10.1.230.180" {
		t.Fatalf("concluded %+v", c)
	}
}

// Each rule the deployment's plan calls, and the fact that trips it: a case
// fails when the call is removed from CheckDeployment.
func TestCheckDeploymentCallsEveryRule(t *testing.T) {
	for _, c := range []struct {
		want   string
		break_ func(d *Deployment)
	}{
		{"error: vLLM placement address does not match", func(d *Deployment) { // D1, pinned
			d.HostIP = "192.168.200.12"
			d.Env[ExecutorEnv] = "0"
		}},
		{"warning: VLLM_HOST_IP is not the address Ray registered", func(d *Deployment) { // D1, not pinned
			d.HostIP = "192.168.200.12"
		}},
		{"error: vLLM placement address does not match", func(d *Deployment) { // D1 from env, which used to bypass it
			d.HostIP = ""
			d.Env["VLLM_HOST_IP"] = "192.168.200.12"
			d.HeadFacts.VLLMVersion = "0.19.1"
		}},
		{"error: vLLM placement address does not match", func(d *Deployment) { // D1, a vLLM older than V2, from the head's env
			d.HostIP = ""
			d.HeadFacts.VLLMEnv = map[string]string{"VLLM_HOST_IP": "192.168.200.12"}
			d.HeadFacts.VLLMVersion = "0.10.1.1+381074ae.nv25.09"
		}},
		{"error: host_ip and env.VLLM_HOST_IP disagree", func(d *Deployment) { // D2
			d.Env["VLLM_HOST_IP"] = "10.1.230.181"
		}},
		{"error: Invalid env.VLLM_HOST_IP", func(d *Deployment) { // D2 through env
			d.HostIP = ""
			d.Env["VLLM_HOST_IP"] = "spark1"
		}},
		{"error: Invalid VLLM_USE_RAY_V2_EXECUTOR_BACKEND", func(d *Deployment) {
			d.Env[ExecutorEnv] = "yes"
		}},
		{"error: The parallel sizes exceed the cluster's GPUs", func(d *Deployment) { // D8 live
			d.Sizes.TP = 3
		}},
		{"error: Not enough free GPUs", func(d *Deployment) { // D8, GPUs held
			d.Sizes.TP = 2
			d.Table.PlacementGroups = []ray.PlacementGroup{{ID: "pg", State: "CREATED", GPUs: 1, Holder: "vllm serve other"}}
		}},
		{"error: The parallel sizes exceed the cluster's GPUs", func(d *Deployment) { // D8 first plan
			d.Table, d.Planned, d.ClusterInRun, d.Sizes.TP = nil, &PlannedGPUs{Total: 1, Nodes: "head 1"}, true, 2
		}},
		{"error: vllm serve would run outside the head's Ray", func(d *Deployment) { // D11
			d.Site = &ServeSite{Serve: "on the host", Ray: "in container ray-node", RayAddress: "10.1.230.180:6379"}
		}},
		{"error: Interface named in env does not exist", func(d *Deployment) { // D9
			d.Env["NCCL_SOCKET_IFNAME"] = "ib0"
		}},
		{"error: vLLM port is already in use on the head", func(d *Deployment) {
			d.Port, d.HeadFacts.Listeners = 8000, []string{"python3"}
		}},
		// Issue 15's rules.
		{"error: Interface named in env does not exist", func(d *Deployment) { // D9 on a worker (V2 passes every variable)
			acrossNodes(d)
			d.Env["NCCL_SOCKET_IFNAME"] = "enp1s0f1np1"
			d.Nodes[1].Facts.Interfaces[1].Name = "enp1s0f0np0"
		}},
		{"error: vLLM is not installed on a node that will host a vLLM worker", func(d *Deployment) { // D19
			acrossNodes(d)
			d.Nodes[1].Facts.VLLMVersion = ""
		}},
		{"error: vLLM differs between the head and a node", func(d *Deployment) { // D19
			acrossNodes(d)
			d.Nodes[1].Facts.VLLMVersion = "0.31.0+cpu"
		}},
		{"error: The model is missing on a node that will host a vLLM worker", func(d *Deployment) { // D20
			acrossNodes(d)
			d.Listings["spark2"] = Listing{Dir: "/models/m", Missing: true}
		}},
		{"error: The model differs on a node", func(d *Deployment) { // D20
			acrossNodes(d)
			d.Listings["spark2"].Files["model-00002-of-00002.safetensors"] = 10
		}},
		{"error: The model is not on the head", func(d *Deployment) { // D20
			acrossNodes(d)
			d.Listings["head"] = Listing{Dir: "/models/m", Missing: true}
		}},
		{"error: The data-parallel master address is not the address Ray registered", func(d *Deployment) { // D1, DP, on a release that pins nothing
			d.HostIP = "192.168.200.12"
			d.Sizes = Sizes{TP: 1, PP: 1, DP: 2, DPOverRay: true}
		}},
		{"error: The parallel sizes exceed the cluster's GPUs", func(d *Deployment) { // D8, DP x PCP
			d.Sizes = Sizes{TP: 1, PP: 1, PCP: 2, DP: 2, DPOverRay: true}
		}},
		{"error: No free GPU on the head for vLLM's legacy executor", func(d *Deployment) { // D8, legacy driver
			d.Env[ExecutorEnv] = "0"
			d.Table.PlacementGroups = []ray.PlacementGroup{{ID: "pg", State: "CREATED", GPUs: 1, Holder: "vllm serve other", GPUsOn: map[string]float64{"a": 1}}}
		}},
		{"error: No free GPU on the head for vLLM's legacy executor", func(d *Deployment) { // D8, legacy driver, first plan
			d.Env[ExecutorEnv] = "0"
			d.Table, d.Planned, d.ClusterInRun = nil, &PlannedGPUs{Total: 2, Head: 0, Nodes: "head 0, spark2 2"}, true
		}},
		{"error: No Ray answers at ray_address", func(d *Deployment) { // D21
			d.Table, d.RayDown, d.RayAddress = nil, true, "10.1.230.180:6380"
		}},
		{"error: No Ray answers at ray_address", func(d *Deployment) { // D21: nothing could be read there, nothing planned
			d.Table, d.RayUnread, d.RayAddress, d.HeadIP, d.HostIP = nil, "dial tcp 10.9.9.9:6379: i/o timeout", "10.9.9.9:6379", "10.9.9.9", "10.9.9.9"
		}},
		{"error: ray_address is a Ray whose head is another node", func(d *Deployment) { // D21
			d.Table.Nodes[0].IP, d.Table.Nodes[0].Resources["node:10.9.9.9"] = "10.9.9.9", 1
			d.HostIP, d.HeadIP = "10.9.9.9", "10.9.9.9"
		}},
		{"error: vLLM placement address does not match", func(d *Deployment) { // D1 from HOST_IP on 0.6.4
			d.HostIP = ""
			d.HeadFacts.VLLMVersion = "0.6.4.post1"
			d.Env["HOST_IP"] = "192.168.200.12"
		}},
		{"error: vLLM placement address does not match", func(d *Deployment) { // D1 before the pin: fails at startup
			d.HostIP = "192.168.200.12"
			d.HeadFacts.VLLMVersion = "0.5.4"
		}},
		{"error: VLLM_USE_RAY_V2_EXECUTOR_BACKEND stops this vLLM at startup", func(d *Deployment) { // D18 with the flag
			d.HeadFacts.VLLMVersion, d.Env[ExecutorEnv], d.FailOnEnviron = "0.33.0", "1", true
		}},
		{"error: Ray is older than the releases the plan can read", func(d *Deployment) { // D24, a Ray started by hand
			d.Table.RayVersion = "2.5.0"
		}},
	} {
		t.Run(c.want, func(t *testing.T) {
			d := fieldReportDeployment()
			c.break_(&d)
			_, found := CheckDeployment(d)
			if got := allSummaries(found); !strings.Contains(got, c.want) {
				t.Fatalf("want %q, got: %s", c.want, got)
			}
		})
	}
}

// ray_address neither planned in this run nor answering (the issue's
// 10.9.9.9): refused, naming the address and why, and no placement rule
// promises the deployment "will serve" on a head identity nobody has.
func TestCheckDeploymentUnreadRayAddressPromisesNothing(t *testing.T) {
	d := fieldReportDeployment()
	d.Table, d.RayAddress, d.HeadIP = nil, "10.9.9.9:6379", "10.9.9.9"
	d.RayUnread = "dial tcp 10.9.9.9:6379: i/o timeout"
	_, found := CheckDeployment(d)
	if len(found) != 1 || found[0].Rule != D21 || found[0].Warning {
		t.Fatalf("want one D21 error, got: %s", allSummaries(found))
	}
	for _, s := range []string{`"10.9.9.9:6379"`, "i/o timeout", "head_address"} {
		if !strings.Contains(found[0].Detail, s) {
			t.Errorf("detail lacks %q: %s", s, found[0].Detail)
		}
	}
	// The same address planned in this run: its planned identity is used.
	d.ClusterInRun = true
	if _, found := CheckDeployment(d); len(found) != 0 && found[0].Rule == D21 {
		t.Fatalf("a cluster planned in this run refused: %s", allSummaries(found))
	}
}

// The deployment's own running server holds its port: not a finding.
func TestCheckDeploymentOwnPort(t *testing.T) {
	d := fieldReportDeployment()
	d.Port, d.HeadFacts.Listeners, d.PortIsOwn = 8000, []string{"python3"}, true
	if _, found := CheckDeployment(d); len(found) != 0 {
		t.Fatalf("the server's own port flagged: %s", allSummaries(found))
	}
	one(t, ServePortFree("10.1.230.180", 8000, []string{"nginx"}), "port = 8000", "10.1.230.180", "nginx", "another port")
}

// Under the legacy executor the address vLLM places by is VLLM_HOST_IP.
func TestCheckDeploymentConcludesPlacement(t *testing.T) {
	d := fieldReportDeployment()
	d.Env[ExecutorEnv] = "0"
	d.HostIP = ""
	c, found := CheckDeployment(d)
	if len(found) != 0 || !c.Executor.Pinned || c.PlacementIP != "10.1.230.180" {
		t.Fatalf("detection = the registered address, pinned: %+v %s", c, allSummaries(found))
	}
}

// acrossNodes makes the deployment tensor parallel 2 over the head and one
// worker, both planned in this run, with the same model on both.
func acrossNodes(d *Deployment) {
	w := spark("10.1.230.181", "192.168.200.13")
	w.VLLMVersion = d.HeadFacts.VLLMVersion
	d.Sizes.TP = 2
	d.ClusterInRun = true
	d.Nodes = []ClusterNode{
		{Node: Node{Name: "head", SSHHost: "10.1.230.180", Facts: d.HeadFacts}, IP: "10.1.230.180", GPUs: 1},
		{Node: Node{Name: "spark2", SSHHost: "10.1.230.181", Facts: w}, IP: "10.1.230.181", GPUs: 1},
	}
	files := func() map[string]int64 {
		return map[string]int64{"config.json": 700, "model-00001-of-00002.safetensors": 4 << 30, "model-00002-of-00002.safetensors": 1 << 30}
	}
	d.Model = "/models/m"
	d.Listings = map[string]Listing{"head": {Dir: "/models/m", Files: files()}, "spark2": {Dir: "/models/m", Files: files()}}
}

// Across two nodes with the same interfaces, vLLM and weights: clean.
func TestCheckDeploymentAcrossNodesClean(t *testing.T) {
	d := fieldReportDeployment()
	acrossNodes(&d)
	d.Env["NCCL_SOCKET_IFNAME"] = "enP7s7"
	if _, found := CheckDeployment(d); len(found) != 0 {
		t.Fatalf("want no findings: %s", allSummaries(found))
	}
}
