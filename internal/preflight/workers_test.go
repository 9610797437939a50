package preflight

import (
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

func exec(t *testing.T, version, flag string) Executor {
	t.Helper()
	f := ExecutorFlag{}
	if flag != "" {
		f = ExecutorFlag{Value: flag, Set: true, Source: "env"}
	}
	e, d := ResolveExecutor(Build{Version: version}, f)
	if d != nil {
		t.Fatalf("%s: %v", version, d)
	}
	return e
}

// Which deployment variables reach the workers, release by release
// (vllm/ray/ray_env.py; vllm/v1/executor/ray_executor_v2.py).
func TestReachesWorkers(t *testing.T) {
	none := map[string]string{}
	for _, c := range []struct {
		name, version, flag string
		env, cluster        map[string]string
		want                bool
	}{
		{"NCCL_SOCKET_IFNAME", "0.32.0", "", none, none, true},                                          // V2 fills in every variable
		{"GLOO_SOCKET_IFNAME", "0.32.0", "", none, none, true},                                          // … Gloo's too
		{"NCCL_SOCKET_IFNAME", "0.32.0", "", none, map[string]string{"NCCL_SOCKET_IFNAME": "x"}, false}, // the worker's own wins
		{"NCCL_SOCKET_IFNAME", "0.32.0", "0", none, none, true},                                         // legacy 0.17+: NCCL_ prefix
		{"UCX_NET_DEVICES", "0.17.1", "", none, none, true},                                             // legacy 0.17+: UCX_ prefix
		{"GLOO_SOCKET_IFNAME", "0.17.1", "", none, none, false},                                         // no GLOO_ prefix
		{"GLOO_SOCKET_IFNAME", "0.17.1", "", map[string]string{"VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY": "GLOO_"}, none, true},
		{"TP_SOCKET_IFNAME", "0.25.0", "0", map[string]string{"VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "A, TP_SOCKET_IFNAME"}, none, true},
		{"NCCL_SOCKET_IFNAME", "0.16.0", "", none, none, false}, // before 0.17: vLLM's own variables only
		{"NCCL_SOCKET_IFNAME", "0.10.1.1", "", none, none, false},
	} {
		env := map[string]string{c.name: "eth0"}
		for k, v := range c.env {
			env[k] = v
		}
		if got := reachesWorkers(c.name, env, c.cluster, exec(t, c.version, c.flag)); got != c.want {
			t.Errorf("%s on vLLM %s (flag %q): reaches workers = %v, want %v", c.name, c.version, c.flag, got, c.want)
		}
	}
}

func TestHostingNodes(t *testing.T) {
	nodes := []ClusterNode{{Node: Node{Name: "head"}, GPUs: 1}, {Node: Node{Name: "w1"}, GPUs: 1}, {Node: Node{Name: "cpu"}, GPUs: 0}, {Node: Node{Name: "unknown"}, GPUs: -1}}
	names := func(ns []ClusterNode) string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		e    Executor
		need int
		want string
	}{
		{exec(t, "0.32.0", "0"), 1, "head"},            // the pin keeps a group that fits on the head there
		{exec(t, "0.32.0", "0"), 2, "head,w1,unknown"}, // it spills
		{exec(t, "0.32.0", ""), 1, "head,w1,unknown"},  // RayExecutorV2 may place it anywhere
		{exec(t, "0.10.1.1", ""), 2, "head,w1,unknown"},
	} {
		if got := names(HostingNodes(nodes, c.e, c.need)); got != c.want {
			t.Errorf("%s need %d: hosts %s, want %s", c.e.Name, c.need, got, c.want)
		}
	}
	if HostingNodes(nil, exec(t, "0.32.0", ""), 2) != nil {
		t.Error("a cluster managed elsewhere has no known nodes")
	}
}

// Configurations the real vLLM runs are not refused.
func TestCheckDeploymentAcceptsWhatServes(t *testing.T) {
	for _, c := range []struct {
		what   string
		change func(d *Deployment)
	}{
		{"GLOO_SOCKET_IFNAME wrong on the worker, legacy 0.32 (not passed to workers)", func(d *Deployment) {
			acrossNodes(d)
			d.Env[ExecutorEnv] = "0"
			d.HeadFacts.Interfaces[0].Name = "ext9"
			d.Env["GLOO_SOCKET_IFNAME"] = "ext9"
		}},
		{"NCCL_SOCKET_IFNAME set by the cluster for the worker, V2", func(d *Deployment) {
			acrossNodes(d)
			d.HeadFacts.Interfaces[0].Name = "ext0"
			d.Env["NCCL_SOCKET_IFNAME"] = "ext0"
			d.ClusterEnv = map[string]string{"NCCL_SOCKET_IFNAME": "enP7s7"}
		}},
		{"no vLLM on a worker the pinned group never reaches", func(d *Deployment) {
			acrossNodes(d)
			d.Sizes.TP = 1
			d.Env[ExecutorEnv] = "0"
			d.Nodes[1].Facts.VLLMVersion = ""
		}},
		{"the same vLLM spelled differently", func(d *Deployment) {
			acrossNodes(d)
			d.Nodes[1].Facts.VLLMVersion = "0.32.0+CPU"
		}},
		{"data parallel over mp", func(d *Deployment) {
			d.HostIP = "192.168.200.12"
			d.Sizes = Sizes{TP: 1, PP: 1, DP: 2}
		}},
		{"data parallel over Ray at the head's address", func(d *Deployment) {
			d.Sizes = Sizes{TP: 1, PP: 1, DP: 2, DPOverRay: true}
		}},
		{"HOST_IP on 0.6.5, which ignores it", func(d *Deployment) {
			d.HostIP = ""
			d.HeadFacts.VLLMVersion = "0.6.5"
			d.Env["HOST_IP"] = "192.168.200.12"
		}},
		{"the legacy executor with the head's GPU free", func(d *Deployment) {
			d.Env[ExecutorEnv] = "0"
			d.Table.PlacementGroups = []ray.PlacementGroup{{ID: "pg", State: "CREATED", GPUs: 1, GPUsOn: map[string]float64{"b": 1}}}
		}},
		{"a restart of this deployment while its own group still holds the head's GPU", func(d *Deployment) {
			d.Env[ExecutorEnv] = "0"
			d.Restart = true
			d.Table.PlacementGroups = []ray.PlacementGroup{{ID: "pg", State: "CREATED", GPUs: 1, GPUsOn: map[string]float64{"a": 1}}}
		}},
		{"a Ray that is down while the cluster is planned in this run", func(d *Deployment) {
			d.Table, d.RayDown, d.ClusterInRun = nil, true, true
		}},
	} {
		d := fieldReportDeployment()
		c.change(&d)
		if _, found := CheckDeployment(d); hasError(found) {
			t.Errorf("%s: refused: %s", c.what, allSummaries(found))
		}
	}
}

func hasError(ds []finding.Finding) bool {
	for _, d := range ds {
		if !d.Warning {
			return true
		}
	}
	return false
}

func TestWeightsNamesTheFirstDifference(t *testing.T) {
	d := fieldReportDeployment()
	acrossNodes(&d)
	delete(d.Listings["spark2"].Files, "config.json")
	d.Listings["spark2"].Files["model-00001-of-00002.safetensors"] = 1
	_, found := CheckDeployment(d)
	one(t, found, "spark2", "/models/m/config.json is missing", "10.1.230.181")
}
