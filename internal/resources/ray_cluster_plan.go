package resources

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/planmemo"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
)

// clusterPlan is one ModifyPlan of spark_ray_cluster under way: the plan
// being modified, the prior state, and what the steps decided so far.
type clusterPlan struct {
	plan  clusterModel
	state *clusterModel // nil: no cluster yet
	// creating: the plan starts the whole cluster, head included: there is
	// no state, or a step decided the cluster is replaced. The framework's
	// own replaces (the attributes' plan modifiers) are not visible here.
	creating bool
	replace  path.Paths // what requires the replace this plan decided
	opts     raycluster.PlanOptions
}

// ModifyPlan reads every node before anything starts: it predicts the IP
// Ray will register for each node (planned as a known value) and turns the
// preflight rules' findings into diagnostics. planCluster lists its steps.
func (r *rayClusterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	if req.Plan.Raw.IsNull() || r.mgr == nil {
		return // destroy, or the provider could not be configured (it said why)
	}
	c, ok := readClusterPlan(ctx, req, &resp.Diagnostics)
	if !ok {
		return
	}
	planned := r.planCluster(ctx, c, &resp.Diagnostics)
	resp.RequiresReplace.Append(c.replace...)
	if planned {
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &c.plan)...)
	}
}

// readClusterPlan reads the plan, the configuration and the prior state,
// and plans Ray's defaults where the configuration leaves them. False: an
// error, or values from resources not yet created, whose checks run at
// apply instead.
func readClusterPlan(ctx context.Context, req resource.ModifyPlanRequest, diags *diag.Diagnostics) (*clusterPlan, bool) {
	var plan, config clusterModel
	diags.Append(req.Plan.Get(ctx, &plan)...)
	diags.Append(req.Config.Get(ctx, &config)...)
	if diags.HasError() || config.hasUnknown() {
		return nil, false // values from resources not yet created: the same checks run at apply
	}
	c := &clusterPlan{plan: plan, creating: req.State.Raw.IsNull(), opts: raycluster.PlanOptions{Known: map[string]string{}}}
	if !c.creating {
		c.state = &clusterModel{}
		if diags.Append(req.State.Get(ctx, c.state)...); diags.HasError() {
			return nil, false
		}
	}
	planRayDefaults(&c.plan, &config)
	return c, true
}

// planCluster runs the plan's steps in order, each deciding one thing.
// False: an error was reported, and the plan is not set.
func (r *rayClusterResource) planCluster(ctx context.Context, c *clusterPlan, diags *diag.Diagnostics) bool {
	customGone := c.replaceIfCustomGone()
	c.replaceIfPortMoves()
	spec, d := c.plan.spec(ctx)
	if diags.Append(d...); diags.HasError() {
		return false
	}
	warnDashboard(&c.plan, diags)
	r.noteRunning(c)
	headDead := c.replaceIfHeadDead()
	c.opts.Replacing = headDead || customGone || r.replacesOwnCluster(c)
	c.opts.HeadRunning, c.opts.Known = knownNodes(c)
	p, err := r.mgr.PlanCluster(ctx, spec, c.opts)
	found, now := planChecks(p, err)
	if err == nil && p.HeadIP != "" {
		// A link under its floor is a fault now where the cluster runs.
		_, probed := r.measureFabric(ctx, &c.plan, spec, p.Registered)
		addPreflight(map[bool]*diag.Diagnostics{true: &found, false: &now}[c.creating], probed)
	}
	if c.startsNothing() && (found.HasError() || now.HasError()) {
		return keepCluster(c, found, now, diags)
	}
	found.Append(now...)
	// On create paths too: a destroy of the rest of the configuration runs
	// this plan in its refresh (a deployment not yet created still plans).
	found = withDestroyHint(found)
	if diags.Append(found...); diags.HasError() {
		return false
	}
	c.replaceIfHeadMoves(p.HeadIP)
	planAddresses(&c.plan, spec, p)
	// Deployments planned after this cluster, in this run, check against it.
	r.memo.RecordCluster(c.plan.HeadAddress.ValueString(), planmemo.Cluster{GPUs: p.GPUs, Runtime: spec.Runtime,
		Nodes: p.Nodes, Endpoints: spec.Endpoints(), Env: spec.Env})
	planNodes(c, p, diags)
	planFabric(c)
	return true
}

// replaceIfCustomGone: custom resources or labels removed from the head's
// configuration replace the cluster, whose head then runs with Ray's
// defaults. It says whether they were.
func (c *clusterPlan) replaceIfCustomGone() bool {
	if c.creating || sameCustom(c.state.Head, c.plan.Head) {
		return false
	}
	c.replace.Append(path.Root("head").AtName("resources"), path.Root("head").AtName("labels"))
	c.creating = true
	return true
}

// replaceIfPortMoves: another gcs_port replaces the cluster (its schema
// says so; this plan cannot see it). Planned as a create: the workers would
// otherwise be probed at the new port as if they already ran there, and
// refused (D5) for a GCS that does not listen there yet.
func (c *clusterPlan) replaceIfPortMoves() {
	if c.creating || c.state.GCSPort.Equal(c.plan.GCSPort) {
		return
	}
	c.replace.Append(path.Root("gcs_port"))
	c.creating = true
}

// warnDashboard warns of a dashboard open to the network.
func warnDashboard(plan *clusterModel, diags *diag.Diagnostics) {
	if plan.DashboardHost.ValueString() != "0.0.0.0" {
		return
	}
	diags.AddAttributeWarning(path.Root("dashboard_host"), "Ray dashboard exposed to the network",
		"dashboard_host = \"0.0.0.0\": anyone who reaches the head's port 8265 can submit jobs that run as the Ray user on every node. "+
			"Keep the default 127.0.0.1 and use an SSH tunnel, unless the network is trusted.")
}

// noteRunning records the cluster of the prior state as running.
// Terraform plans a replacement twice: with the prior state (this
// resource cannot see that its attributes require a replace), then
// without it. The first call notes the running cluster; in the second,
// its GCS port is held by the cluster the apply destroys first
// (replacesOwnCluster).
func (r *rayClusterResource) noteRunning(c *clusterPlan) {
	if c.state != nil {
		r.memo.NoteRunning(c.state.Head.SSHHost.ValueString(), int(c.state.GCSPort.ValueInt64()))
	}
}

// replacesOwnCluster: this is the second call of a replacement's plan
// (noteRunning), on the head and GCS port of the cluster it replaces.
func (r *rayClusterResource) replacesOwnCluster(c *clusterPlan) bool {
	return c.state == nil && r.memo.Running(c.plan.Head.SSHHost.ValueString(), int(c.plan.GCSPort.ValueInt64()))
}

// replaceIfHeadDead: a head whose raylet died (its GCS still up) is
// replaced, like a cluster whose plan is made without its state. It says
// whether it is.
func (c *clusterPlan) replaceIfHeadDead() bool {
	if c.state == nil || c.state.Head.Alive.IsNull() || c.state.Head.Alive.ValueBool() {
		return false
	}
	c.replace.Append(path.Root("head"))
	c.creating = true
	return true
}

// knownNodes says, for a cluster the plan keeps, whether its head runs,
// and which nodes keep running with the IP Ray registered for each: a
// fact for the checks, not a prediction. Of a cluster the plan creates,
// nothing is known.
func knownNodes(c *clusterPlan) (headRunning bool, known map[string]string) {
	known = map[string]string{}
	if c.creating {
		return false, known
	}
	if sameNodeIP(c.state.Head, c.plan.Head) {
		known[raycluster.HeadName] = c.state.Head.RegisteredIP.ValueString()
	}
	for name, w := range c.plan.Workers {
		if old, ok := c.state.Workers[name]; ok && old.Alive.ValueBool() && sameNode(old, w) {
			known[name] = old.RegisteredIP.ValueString()
		}
	}
	return c.state.Head.Alive.ValueBool(), known
}

// startsNothing: the cluster is kept and every node in the plan runs as
// it is. Then the checks, which guard starting Ray, warn.
func (c *clusterPlan) startsNothing() bool {
	return !c.creating && c.opts.HeadRunning && len(c.opts.Known) == 1+len(c.plan.Workers)
}

// planChecks sorts what reading the nodes found: found, the checks that
// guard a start; now, the faults of what runs now, which fail the plan
// even when it starts nothing.
func planChecks(p *raycluster.Plan, err error) (found, now diag.Diagnostics) {
	switch {
	case err != nil && faultNow(err):
		now.AddError("Cannot read the nodes for this plan", err.Error())
	case err != nil:
		found.AddError("Cannot read the nodes for this plan", err.Error())
	default:
		addPreflight(&found, guards(p.Diagnostics, false))
		addPreflight(&now, guards(p.Diagnostics, true))
	}
	return found, now
}

// keepCluster plans a cluster that starts nothing, though a check failed:
// the checks that guard a start become warnings, and the plan keeps what
// the state has. A fault of what runs now still fails it (false).
func keepCluster(c *clusterPlan, found, now diag.Diagnostics, diags *diag.Diagnostics) bool {
	diags.Append(startGuardsAsWarnings(found)...)
	if diags.Append(withDestroyHint(now)...); now.HasError() {
		return false
	}
	keepFromState(&c.plan, c.state)
	return true
}

// replaceIfHeadMoves: a head that would register another address replaces
// the cluster: workers and every client address the cluster by it.
func (c *clusterPlan) replaceIfHeadMoves(headIP string) {
	if c.creating || headIP == c.state.Head.RegisteredIP.ValueString() {
		return
	}
	c.replace.Append(path.Root("head").AtName("node_ip"))
	c.creating = true
}

// planAddresses plans what the cluster is known by: its ID, its GCS
// address, and the Ray version its head runs.
func planAddresses(plan *clusterModel, spec raycluster.Spec, p *raycluster.Plan) {
	plan.ID = plan.Head.SSHHost
	plan.HeadAddress = types.StringValue(net.JoinHostPort(p.HeadIP, strconv.Itoa(spec.GCSPort)))
	plan.RayVersion = types.StringValue(p.RayVersion)
}

// planNodes plans every node as alive under the IP the plan predicted (or
// Ray registered), keeping what Ray reported of a node that keeps running,
// and warns of each kept worker that is not alive: the apply restarts it.
func planNodes(c *clusterPlan, p *raycluster.Plan, diags *diag.Diagnostics) {
	planNode := func(name string, n *rayNodeModel, old *rayNodeModel, kept bool) {
		n.RegisteredIP = types.StringValue(p.Registered[name])
		n.Alive = types.BoolValue(true)
		if kept {
			n.keepRegistered(old)
		} else {
			n.NodeID = types.StringUnknown()
		}
	}
	var oldHead *rayNodeModel
	if c.state != nil {
		oldHead = c.state.Head
	}
	planNode(raycluster.HeadName, c.plan.Head, oldHead, !c.creating)
	for _, name := range slices.Sorted(maps.Keys(c.plan.Workers)) {
		var old *rayNodeModel
		if c.state != nil {
			old = c.state.Workers[name]
		}
		if !c.creating && old != nil && !old.Alive.ValueBool() {
			diags.AddAttributeWarning(path.Root("workers").AtMapKey(name), "Ray worker is not alive",
				fmt.Sprintf("worker %s is not alive in Ray's node table; apply will restart Ray on it and wait until it registers as %s.",
					nodeNotAlive(name, old), p.Registered[name]))
		}
		_, kept := c.opts.Known[name]
		planNode(name, c.plan.Workers[name], old, kept)
	}
}

// planRayDefaults plans resources and labels left null in the
// configuration as what Ray registers without them: none of ours. Left to
// the framework, these optional, computed attributes would keep the prior
// state's values, and removing them from a configuration would change
// nothing on the nodes and show no diff.
func planRayDefaults(plan, config *clusterModel) {
	none := func(n, c *rayNodeModel) {
		if c == nil {
			return
		}
		if c.Resources.IsNull() {
			n.Resources = types.MapValueMust(types.Float64Type, map[string]attr.Value{})
		}
		if c.Labels.IsNull() {
			n.Labels = types.MapValueMust(types.StringType, map[string]attr.Value{})
		}
	}
	none(plan.Head, config.Head)
	for name, w := range plan.Workers {
		none(w, config.Workers[name])
	}
}

// keepFromState plans a cluster that changes nothing as the state has it.
func keepFromState(plan, state *clusterModel) {
	plan.ID, plan.HeadAddress, plan.RayVersion, plan.FabricGbps = state.ID, state.HeadAddress, state.RayVersion, state.FabricGbps
	keep := func(n, old *rayNodeModel) {
		n.RegisteredIP, n.Alive = old.RegisteredIP, old.Alive
		n.keepRegistered(old)
	}
	keep(plan.Head, state.Head)
	for name, w := range plan.Workers {
		keep(w, state.Workers[name])
	}
}

// keepRegistered plans a node whose Ray keeps running: its node ID, and what
// Ray registered where the configuration leaves it to Ray.
func (n *rayNodeModel) keepRegistered(old *rayNodeModel) {
	n.NodeID = old.NodeID
	if n.NumGPUs.IsUnknown() {
		n.NumGPUs = old.NumGPUs
	}
	if n.Resources.IsUnknown() {
		n.Resources = old.Resources
	}
	if n.Labels.IsUnknown() {
		n.Labels = old.Labels
	}
}

// sameCustom: the node's custom resources and labels are planned as they run.
func sameCustom(old, n *rayNodeModel) bool {
	return (n.Resources.IsUnknown() || old.Resources.Equal(n.Resources)) && (n.Labels.IsUnknown() || old.Labels.Equal(n.Labels))
}

// sameNodeIP: the new node_ip keeps what Ray registered. Setting node_ip to
// the address Ray already registered (as after an import) restarts nothing.
func sameNodeIP(old, b *rayNodeModel) bool {
	if b.NodeIP.IsNull() {
		return old.NodeIP.IsNull()
	}
	return b.NodeIP.Equal(old.NodeIP) || b.NodeIP.Equal(old.RegisteredIP)
}

// sameEndpoint: the worker is reached at the same place as the same user.
func sameEndpoint(a, b *rayNodeModel) bool {
	return a.SSHHost.Equal(b.SSHHost) && a.SSHPort.Equal(b.SSHPort) && a.SSHUser.Equal(b.SSHUser)
}

// sameNode: a worker whose Ray-facing settings did not change keeps running.
// Where and as whom it is reached count: another port may be another
// machine, and Ray runs as the SSH user (the old one stops it, the new one
// starts it). host_key only checks the node.
func sameNode(a, b *rayNodeModel) bool {
	return sameEndpoint(a, b) && sameNodeIP(a, b) && a.Interface.Equal(b.Interface) &&
		(b.NumGPUs.IsUnknown() || a.NumGPUs.Equal(b.NumGPUs)) && sameCustom(a, b)
}
