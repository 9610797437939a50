package resources

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
)

// Unit tests of spark_ray_cluster's plan steps (ray_cluster_plan.go): pure
// functions of the plan, the state and what raycluster read, no node.

// runningNode is a node as a state has it after an apply: every value
// known, Ray alive under registeredIP.
func runningNode(host, registeredIP string) *rayNodeModel {
	return &rayNodeModel{
		NodeAccess: schemaparts.NodeAccess{SSHHost: types.StringValue(host), SSHPort: types.Int64Null(),
			SSHUser: types.StringNull(), HostKey: types.StringNull()},
		NodeIP: types.StringNull(), NumGPUs: types.Int64Value(1),
		Resources:    types.MapValueMust(types.Float64Type, map[string]attr.Value{}),
		Labels:       types.MapValueMust(types.StringType, map[string]attr.Value{}),
		RegisteredIP: types.StringValue(registeredIP), NodeID: types.StringValue("id-" + host), Alive: types.BoolValue(true),
	}
}

// plannedNode is the same node as a plan has it before ModifyPlan: what
// Ray reports is unknown.
func plannedNode(host string) *rayNodeModel {
	n := runningNode(host, "")
	n.RegisteredIP, n.NodeID, n.Alive = types.StringUnknown(), types.StringUnknown(), types.BoolUnknown()
	return n
}

// runningCluster is a state: head spark1 (10.0.0.1), worker w (10.0.0.2).
func runningCluster() *clusterModel {
	return &clusterModel{ID: types.StringValue("spark1"), Head: runningNode("spark1", "10.0.0.1"),
		Workers: map[string]*rayNodeModel{"w": runningNode("spark2", "10.0.0.2")}, GCSPort: types.Int64Value(6379),
		HeadAddress: types.StringValue("10.0.0.1:6379"), RayVersion: types.StringValue("2.52.1"), DashboardHost: types.StringValue("127.0.0.1")}
}

// plannedCluster is runningCluster's configuration, planned.
func plannedCluster() *clusterModel {
	return &clusterModel{ID: types.StringUnknown(), Head: plannedNode("spark1"),
		Workers: map[string]*rayNodeModel{"w": plannedNode("spark2")}, GCSPort: types.Int64Value(6379),
		HeadAddress: types.StringUnknown(), RayVersion: types.StringUnknown(), DashboardHost: types.StringValue("127.0.0.1")}
}

// keptPlan is a plan of the running cluster that changes nothing.
func keptPlan() *clusterPlan {
	return &clusterPlan{plan: *plannedCluster(), state: runningCluster(), opts: raycluster.PlanOptions{Known: map[string]string{}}}
}

func pathOf(d diag.Diagnostic) path.Path {
	if p, ok := d.(diag.DiagnosticWithPath); ok {
		return p.Path()
	}
	return path.Empty()
}

func TestSameEndpoint(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*rayNodeModel)
		want   bool
	}{
		{"nothing changed", func(*rayNodeModel) {}, true},
		{"host_key only checks the node", func(n *rayNodeModel) { n.HostKey = types.StringValue("ssh-ed25519 AAAA") }, true},
		{"another host", func(n *rayNodeModel) { n.SSHHost = types.StringValue("spark3") }, false},
		{"another port: maybe another machine", func(n *rayNodeModel) { n.SSHPort = types.Int64Value(2222) }, false},
		{"another user", func(n *rayNodeModel) { n.SSHUser = types.StringValue("ops2") }, false},
	} {
		n := runningNode("spark2", "10.0.0.2")
		c.change(n)
		if got := sameEndpoint(runningNode("spark2", "10.0.0.2"), n); got != c.want {
			t.Errorf("%s: sameEndpoint = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSameNodeIP(t *testing.T) {
	ip := types.StringValue
	for _, c := range []struct {
		name          string
		old, planned  types.String
		registeredOld string
		want          bool
	}{
		{"left to Ray, as before", types.StringNull(), types.StringNull(), "10.0.0.2", true},
		{"the same node_ip", ip("192.168.0.2"), ip("192.168.0.2"), "192.168.0.2", true},
		{"set to what Ray registered (after an import)", types.StringNull(), ip("10.0.0.2"), "10.0.0.2", true},
		{"set to another address", types.StringNull(), ip("192.168.0.2"), "10.0.0.2", false},
		{"changed", ip("192.168.0.2"), ip("192.168.0.3"), "192.168.0.2", false},
		{"removed: Ray detects again", ip("192.168.0.2"), types.StringNull(), "192.168.0.2", false},
	} {
		old, n := runningNode("spark2", c.registeredOld), plannedNode("spark2")
		old.NodeIP, n.NodeIP = c.old, c.planned
		if got := sameNodeIP(old, n); got != c.want {
			t.Errorf("%s: sameNodeIP = %v, want %v", c.name, got, c.want)
		}
	}
}

// The cases the attribute-change table (attribute_changes_test.go) does not
// reach: values a plan leaves unknown, and a worker planned as it runs.
func TestSameNode(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*rayNodeModel)
		want   bool
	}{
		{"planned as it runs", func(*rayNodeModel) {}, true},
		{"num_gpus left to Ray (unknown)", func(n *rayNodeModel) { n.NumGPUs = types.Int64Unknown() }, true},
		{"resources and labels left to Ray (unknown)", func(n *rayNodeModel) {
			n.Resources, n.Labels = types.MapUnknown(types.Float64Type), types.MapUnknown(types.StringType)
		}, true},
		{"another GPU count", func(n *rayNodeModel) { n.NumGPUs = types.Int64Value(2) }, false},
		{"a label added", func(n *rayNodeModel) {
			n.Labels = types.MapValueMust(types.StringType, map[string]attr.Value{"rack": types.StringValue("r1")})
		}, false},
		{"another SSH user", func(n *rayNodeModel) { n.SSHUser = types.StringValue("ops2") }, false},
	} {
		n := plannedNode("spark2")
		c.change(n)
		if got := sameNode(runningNode("spark2", "10.0.0.2"), n); got != c.want {
			t.Errorf("%s: sameNode = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestKeepRegistered(t *testing.T) {
	old := runningNode("spark2", "10.0.0.2")
	old.NumGPUs = types.Int64Value(4)
	old.Labels = types.MapValueMust(types.StringType, map[string]attr.Value{"rack": types.StringValue("r1")})
	n := plannedNode("spark2")
	n.NumGPUs, n.Labels = types.Int64Unknown(), types.MapUnknown(types.StringType) // left to Ray
	n.Resources = types.MapValueMust(types.Float64Type, map[string]attr.Value{"spark.a": types.Float64Value(1)})
	n.keepRegistered(old)
	if !n.NodeID.Equal(old.NodeID) || !n.NumGPUs.Equal(old.NumGPUs) || !n.Labels.Equal(old.Labels) {
		t.Errorf("what Ray registered was not kept: node_id %v num_gpus %v labels %v", n.NodeID, n.NumGPUs, n.Labels)
	}
	if len(n.Resources.Elements()) != 1 {
		t.Errorf("configured resources replaced by the state's: %v", n.Resources)
	}
	if !n.RegisteredIP.IsUnknown() || !n.Alive.IsUnknown() {
		t.Errorf("keepRegistered plans only the node ID and Ray's own values: registered_ip %v alive %v", n.RegisteredIP, n.Alive)
	}
}

func TestKeepFromState(t *testing.T) {
	plan, state := plannedCluster(), runningCluster()
	state.Workers["w"].Alive = types.BoolValue(false)
	keepFromState(plan, state)
	if !plan.ID.Equal(state.ID) || !plan.HeadAddress.Equal(state.HeadAddress) || !plan.RayVersion.Equal(state.RayVersion) {
		t.Errorf("cluster values not from state: %v %v %v", plan.ID, plan.HeadAddress, plan.RayVersion)
	}
	for name, n := range map[string][2]*rayNodeModel{"head": {plan.Head, state.Head}, "w": {plan.Workers["w"], state.Workers["w"]}} {
		if !n[0].RegisteredIP.Equal(n[1].RegisteredIP) || !n[0].Alive.Equal(n[1].Alive) || !n[0].NodeID.Equal(n[1].NodeID) {
			t.Errorf("%s: planned %v %v %v, state has %v %v %v", name, n[0].RegisteredIP, n[0].Alive, n[0].NodeID,
				n[1].RegisteredIP, n[1].Alive, n[1].NodeID)
		}
	}
}

func TestHasUnknown(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*clusterModel)
		want   bool
	}{
		{"every value known", func(*clusterModel) {}, false},
		{"computed values unknown do not count", func(m *clusterModel) { m.Head.NodeID, m.RayVersion = types.StringUnknown(), types.StringUnknown() }, false},
		{"no head", func(m *clusterModel) { m.Head = nil }, true},
		{"a nil worker", func(m *clusterModel) { m.Workers["x"] = nil }, true},
		{"gcs_port", func(m *clusterModel) { m.GCSPort = types.Int64Unknown() }, true},
		{"env", func(m *clusterModel) { m.Env = types.MapUnknown(types.StringType) }, true},
		{"start_args", func(m *clusterModel) { m.StartArgs = types.ListUnknown(types.StringType) }, true},
		{"a worker's ssh_host", func(m *clusterModel) { m.Workers["w"].SSHHost = types.StringUnknown() }, true},
		{"the head's ssh_user", func(m *clusterModel) { m.Head.SSHUser = types.StringUnknown() }, true},
		{"a worker's host_key", func(m *clusterModel) { m.Workers["w"].HostKey = types.StringUnknown() }, true},
		{"a worker's node_ip", func(m *clusterModel) { m.Workers["w"].NodeIP = types.StringUnknown() }, true},
		{"the head's labels", func(m *clusterModel) { m.Head.Labels = types.MapUnknown(types.StringType) }, true},
		{"the container's image", func(m *clusterModel) {
			m.Runtime = &runtimeModel{Container: &containerRuntimeModel{Image: types.StringUnknown(), RunArgs: types.ListNull(types.StringType)}}
		}, true},
		{"the container's run_args", func(m *clusterModel) {
			m.Runtime = &runtimeModel{Container: &containerRuntimeModel{Image: types.StringValue("ray"), RunArgs: types.ListUnknown(types.StringType)}}
		}, true},
		{"a host runtime", func(m *clusterModel) { m.Runtime = &runtimeModel{Host: &hostRuntimeModel{}} }, false},
	} {
		m := runningCluster()
		m.Env, m.StartArgs = types.MapNull(types.StringType), types.ListNull(types.StringType)
		c.change(m)
		if got := m.hasUnknown(); got != c.want {
			t.Errorf("%s: hasUnknown = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestWarnDashboard(t *testing.T) {
	var diags diag.Diagnostics
	warnDashboard(plannedCluster(), &diags)
	if len(diags) != 0 {
		t.Fatalf("the default 127.0.0.1 warned: %v", diags)
	}
	open := plannedCluster()
	open.DashboardHost = types.StringValue("0.0.0.0")
	warnDashboard(open, &diags)
	if len(diags) != 1 || diags.WarningsCount() != 1 || diags[0].Summary() != "Ray dashboard exposed to the network" ||
		!pathOf(diags[0]).Equal(path.Root("dashboard_host")) || !strings.Contains(diags[0].Detail(), "port 8265") {
		t.Fatalf("0.0.0.0: %v", diags)
	}
}

func TestReplaceIfCustomGone(t *testing.T) {
	c := keptPlan()
	if c.replaceIfCustomGone() || c.creating || len(c.replace) != 0 {
		t.Fatalf("unchanged head replaced: %v", c.replace)
	}
	c.state.Head.Resources = types.MapValueMust(types.Float64Type, map[string]attr.Value{"spark.head": types.Float64Value(1)})
	if !c.replaceIfCustomGone() || !c.creating {
		t.Fatal("custom resources removed from the head did not replace the cluster")
	}
	want := path.Paths{path.Root("head").AtName("resources"), path.Root("head").AtName("labels")}
	if len(c.replace) != 2 || !c.replace[0].Equal(want[0]) || !c.replace[1].Equal(want[1]) {
		t.Fatalf("replace = %v, want %v", c.replace, want)
	}
	create := &clusterPlan{plan: *plannedCluster(), creating: true}
	if create.replaceIfCustomGone() || len(create.replace) != 0 {
		t.Fatal("a create has no custom values to lose")
	}
}

func TestReplaceIfHeadDead(t *testing.T) {
	for _, c := range []struct {
		name  string
		alive types.Bool
		want  bool
	}{{"alive", types.BoolValue(true), false}, {"dead", types.BoolValue(false), true}, {"never read (null)", types.BoolNull(), false}} {
		p := keptPlan()
		p.state.Head.Alive = c.alive
		if got := p.replaceIfHeadDead(); got != c.want || p.creating != c.want || (len(p.replace) == 1) != c.want {
			t.Errorf("%s: replaced %v (creating %v, %v), want %v", c.name, got, p.creating, p.replace, c.want)
		}
		if c.want && !p.replace[0].Equal(path.Root("head")) {
			t.Errorf("%s: replace = %v, want head", c.name, p.replace)
		}
	}
	if (&clusterPlan{creating: true}).replaceIfHeadDead() {
		t.Error("a create replaced a head")
	}
}
