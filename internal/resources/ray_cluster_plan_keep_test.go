package resources

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

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
	p := &raycluster.Plan{Diagnostics: []finding.Finding{
		{Rule: preflight.D5, Path: finding.Attr("workers").Key("w").Attr("ssh_host"), Summary: "guards a start", Detail: "a"},
		{Rule: preflight.D3, Now: true, Path: finding.Attr("head", "node_ip"), Summary: "fault now", Detail: "b"},
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
