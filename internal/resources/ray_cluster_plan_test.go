package resources

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Unit tests of spark_ray_cluster's plan steps (ray_cluster_plan.go): pure
// functions of the plan, the state and what raycluster read, no node.

// runningNode is a node as a state has it after an apply: every value
// known, Ray alive under registeredIP.
func runningNode(host, registeredIP string) *rayNodeModel {
	return &rayNodeModel{
		NodeAccess: providerdata.NodeAccess{SSHHost: types.StringValue(host), SSHPort: types.Int64Null(),
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

func TestKeepRunning(t *testing.T) {
	old := runningNode("spark2", "10.0.0.2")
	old.NumGPUs = types.Int64Value(4)
	old.Labels = types.MapValueMust(types.StringType, map[string]attr.Value{"rack": types.StringValue("r1")})
	n := plannedNode("spark2")
	n.NumGPUs, n.Labels = types.Int64Unknown(), types.MapUnknown(types.StringType) // left to Ray
	n.Resources = types.MapValueMust(types.Float64Type, map[string]attr.Value{"spark.a": types.Float64Value(1)})
	n.keepRunning(old)
	if !n.NodeID.Equal(old.NodeID) || !n.NumGPUs.Equal(old.NumGPUs) || !n.Labels.Equal(old.Labels) {
		t.Errorf("what Ray registered was not kept: node_id %v num_gpus %v labels %v", n.NodeID, n.NumGPUs, n.Labels)
	}
	if len(n.Resources.Elements()) != 1 {
		t.Errorf("configured resources replaced by the state's: %v", n.Resources)
	}
	if !n.RegisteredIP.IsUnknown() || !n.Alive.IsUnknown() {
		t.Errorf("keepRunning plans only the node ID and Ray's own values: registered_ip %v alive %v", n.RegisteredIP, n.Alive)
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

func TestKnownNodes(t *testing.T) {
	c := keptPlan()
	c.plan.Workers["new"] = plannedNode("spark3")
	c.plan.Workers["moved"] = plannedNode("spark4")
	c.state.Workers["moved"] = runningNode("spark5", "10.0.0.5")
	c.plan.Workers["dead"] = plannedNode("spark6")
	c.state.Workers["dead"] = runningNode("spark6", "10.0.0.6")
	c.state.Workers["dead"].Alive = types.BoolValue(false)
	running, known := knownNodes(c)
	want := map[string]string{raycluster.HeadName: "10.0.0.1", "w": "10.0.0.2"}
	if !running || len(known) != len(want) || known[raycluster.HeadName] != want[raycluster.HeadName] || known["w"] != want["w"] {
		t.Fatalf("headRunning %v, known %v; want true, %v", running, known, want)
	}
	c.plan.Head.NodeIP = types.StringValue("192.168.0.1")
	if _, known := knownNodes(c); known[raycluster.HeadName] != "" {
		t.Errorf("a head whose node_ip changes is known as %q", known[raycluster.HeadName])
	}
	c.state.Head.Alive = types.BoolValue(false)
	if running, _ := knownNodes(c); running {
		t.Error("a dead head counted as running")
	}
	c.creating = true
	if running, known := knownNodes(c); running || known == nil || len(known) != 0 {
		t.Errorf("creating: headRunning %v, known %v; want false and an empty map", running, known)
	}
}

func TestStartsNothing(t *testing.T) {
	c := keptPlan()
	c.opts.HeadRunning, c.opts.Known = knownNodes(c)
	if !c.startsNothing() {
		t.Fatalf("a plan of the running cluster as it is starts something: %+v", c.opts)
	}
	c.plan.Workers["new"] = plannedNode("spark3")
	if c.startsNothing() {
		t.Error("a new worker starts nothing")
	}
	c = keptPlan()
	c.opts.HeadRunning, c.opts.Known = knownNodes(c)
	c.creating = true
	if c.startsNothing() {
		t.Error("a replacement starts nothing")
	}
}

func TestPlanChecks(t *testing.T) {
	changed := &transport.Error{Step: "handshake", ExitStatus: -1, Err: &transport.HostKeyError{Problem: transport.HostKeyChanged}}
	found, now := planChecks(nil, changed)
	if len(found) != 0 || now.ErrorsCount() != 1 || now[0].Summary() != "Cannot read the nodes for this plan" {
		t.Errorf("a changed host key: found %v, now %v", found, now)
	}
	found, now = planChecks(nil, errors.New("connection refused"))
	if len(now) != 0 || found.ErrorsCount() != 1 || found[0].Detail() != "connection refused" {
		t.Errorf("a read error: found %v, now %v", found, now)
	}
	p := &raycluster.Plan{Diagnostics: []preflight.Diagnostic{
		{Rule: preflight.D5, Attr: []string{"workers", "[w]", "ssh_host"}, Summary: "guards a start", Detail: "a"},
		{Rule: preflight.D3, Now: true, Attr: []string{"head", "node_ip"}, Summary: "fault now", Detail: "b"},
		{Warning: true, Summary: "a warning", Detail: "c"},
	}}
	found, now = planChecks(p, nil)
	if len(found) != 2 || found[0].Summary() != "guards a start" || found[1].Summary() != "a warning" ||
		!pathOf(found[0]).Equal(path.Root("workers").AtMapKey("w").AtName("ssh_host")) {
		t.Errorf("found = %v", found)
	}
	if len(now) != 1 || now[0].Summary() != "fault now" || now[0].Detail() != "b"+preflight.D3.Cite() ||
		!pathOf(now[0]).Equal(path.Root("head").AtName("node_ip")) {
		t.Errorf("now = %v", now)
	}
}

func TestKeepCluster(t *testing.T) {
	var found, now diag.Diagnostics
	found.AddAttributeError(path.Root("workers").AtMapKey("w"), "guards a start", "a")
	c := keptPlan()
	var diags diag.Diagnostics
	if !keepCluster(c, found, now, &diags) {
		t.Fatal("a check that guards a start failed a plan that starts nothing")
	}
	if diags.HasError() || len(diags) != 1 || !strings.HasPrefix(diags[0].Detail(), "Nothing is started") ||
		!pathOf(diags[0]).Equal(path.Root("workers").AtMapKey("w")) {
		t.Errorf("diagnostics = %v", diags)
	}
	if !c.plan.ID.Equal(c.state.ID) || !c.plan.Workers["w"].NodeID.Equal(c.state.Workers["w"].NodeID) {
		t.Errorf("the plan does not keep the state: %v %v", c.plan.ID, c.plan.Workers["w"].NodeID)
	}
	now.AddError("fault now", "b")
	c, diags = keptPlan(), nil
	if keepCluster(c, found, now, &diags) {
		t.Fatal("a fault of what runs now passed")
	}
	if diags.ErrorsCount() != 1 || !strings.HasSuffix(diags.Errors()[0].Detail(), destroyHint) || diags.WarningsCount() != 1 {
		t.Errorf("diagnostics = %v", diags)
	}
	if !c.plan.ID.IsUnknown() {
		t.Error("a failed plan was still kept from state")
	}
}

func TestReplaceIfHeadMoves(t *testing.T) {
	c := keptPlan()
	c.replaceIfHeadMoves("10.0.0.1")
	if c.creating || len(c.replace) != 0 {
		t.Fatalf("a head that registers where it did was replaced: %v", c.replace)
	}
	c.replaceIfHeadMoves("192.168.0.1")
	if !c.creating || len(c.replace) != 1 || !c.replace[0].Equal(path.Root("head").AtName("node_ip")) {
		t.Fatalf("a head that registers elsewhere: creating %v, replace %v", c.creating, c.replace)
	}
	create := &clusterPlan{plan: *plannedCluster(), creating: true}
	create.replaceIfHeadMoves("192.168.0.1")
	if len(create.replace) != 0 {
		t.Fatal("a create replaced")
	}
}

func TestPlanAddresses(t *testing.T) {
	plan := plannedCluster()
	planAddresses(plan, raycluster.Spec{GCSPort: 6380}, &raycluster.Plan{HeadIP: "fd00::1", RayVersion: "2.52.1"})
	if plan.ID.ValueString() != "spark1" || plan.HeadAddress.ValueString() != "[fd00::1]:6380" || plan.RayVersion.ValueString() != "2.52.1" {
		t.Fatalf("planned %v %v %v", plan.ID, plan.HeadAddress, plan.RayVersion)
	}
}

func TestPlanNodes(t *testing.T) {
	p := &raycluster.Plan{Registered: map[string]string{raycluster.HeadName: "10.0.0.1", "w": "10.0.0.2", "new": "10.0.0.3"}}
	c := keptPlan()
	c.plan.Workers["new"] = plannedNode("spark3")
	c.state.Workers["w"].Alive = types.BoolValue(false)
	c.opts.HeadRunning, c.opts.Known = knownNodes(c)
	var diags diag.Diagnostics
	planNodes(c, p, &diags)
	for name, n := range map[string]*rayNodeModel{"head": c.plan.Head, "w": c.plan.Workers["w"], "new": c.plan.Workers["new"]} {
		if !n.Alive.ValueBool() || n.RegisteredIP.ValueString() != p.Registered[name] {
			t.Errorf("%s: planned alive %v as %v, want alive as %s", name, n.Alive, n.RegisteredIP, p.Registered[name])
		}
	}
	if !c.plan.Head.NodeID.Equal(c.state.Head.NodeID) {
		t.Errorf("the kept head's node ID: %v", c.plan.Head.NodeID)
	}
	if !c.plan.Workers["w"].NodeID.IsUnknown() || !c.plan.Workers["new"].NodeID.IsUnknown() {
		t.Errorf("restarted or new workers' node IDs are known: %v %v", c.plan.Workers["w"].NodeID, c.plan.Workers["new"].NodeID)
	}
	want := "worker w (spark2, registered as 10.0.0.2) is not alive in Ray's node table; apply will restart Ray on it and wait until it registers as 10.0.0.2."
	if len(diags) != 1 || diags[0].Summary() != "Ray worker is not alive" || diags[0].Detail() != want ||
		!pathOf(diags[0]).Equal(path.Root("workers").AtMapKey("w")) || diags.HasError() {
		t.Fatalf("diagnostics = %v", diags)
	}
	// A cluster created (or replaced): nothing is kept, nothing warned.
	c = keptPlan()
	c.creating = true
	c.state.Workers["w"].Alive = types.BoolValue(false)
	diags = nil
	planNodes(c, p, &diags)
	if len(diags) != 0 || !c.plan.Head.NodeID.IsUnknown() {
		t.Fatalf("creating: diagnostics %v, head node ID %v", diags, c.plan.Head.NodeID)
	}
}
