package resources

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
)

var (
	_ resource.ResourceWithModifyPlan  = (*rayClusterResource)(nil)
	_ resource.ResourceWithImportState = (*rayClusterResource)(nil)
	_ resource.ResourceWithConfigure   = (*rayClusterResource)(nil)
)

// NewRayCluster is the spark_ray_cluster resource.
func NewRayCluster() resource.Resource { return &rayClusterResource{} }

type rayClusterResource struct {
	mgr *raycluster.Manager
}

func (r *rayClusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_ray_cluster"
}

func (r *rayClusterResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	data, diags := providerdata.From(req.ProviderData)
	resp.Diagnostics.Append(diags...)
	if data != nil {
		r.mgr = data.Clusters
	}
}

// ModifyPlan reads every node before anything starts: it predicts the IP
// Ray will register for each node (planned as a known value) and turns the
// preflight rules' findings into diagnostics.
func (r *rayClusterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	if req.Plan.Raw.IsNull() || r.mgr == nil {
		return // destroy, or the provider could not be configured (it said why)
	}
	var plan, config clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() || config.hasUnknown() {
		return // values from resources not yet created: the same checks run at apply
	}
	var state *clusterModel
	if !req.State.Raw.IsNull() {
		state = &clusterModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
	}
	creating := state == nil // resp.RequiresReplace is empty here: the attributes' replaces are not visible
	planRayDefaults(&plan, &config)
	customGone := !creating && !sameCustom(state.Head, plan.Head)
	if customGone {
		// Removed from the configuration: the head runs with Ray's defaults.
		resp.RequiresReplace.Append(path.Root("head").AtName("resources"), path.Root("head").AtName("labels"))
		creating = true
	}
	spec, diags := plan.spec(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.DashboardHost.ValueString() == "0.0.0.0" {
		resp.Diagnostics.AddAttributeWarning(path.Root("dashboard_host"), "Ray dashboard exposed to the network",
			"dashboard_host = \"0.0.0.0\": anyone who reaches the head's port 8265 can submit jobs that run as the Ray user on every node. "+
				"Keep the default 127.0.0.1 and use an SSH tunnel, unless the network is trusted.")
	}
	opts := raycluster.PlanOptions{Known: map[string]string{}}
	// Terraform plans a replacement twice: with the prior state (this
	// resource cannot see that its attributes require a replace), then
	// without it. The first call notes the running cluster; in the second,
	// its GCS port is held by the cluster the apply destroys first.
	// A head whose raylet died (its GCS still up) is replaced the same way.
	headDead := state != nil && !state.Head.Alive.IsNull() && !state.Head.Alive.ValueBool()
	if state != nil {
		r.mgr.NoteRunning(state.Head.SSHHost.ValueString(), int(state.GCSPort.ValueInt64()))
	}
	if headDead {
		resp.RequiresReplace.Append(path.Root("head"))
		creating = true
	}
	opts.Replacing = headDead || customGone || state == nil && r.mgr.Running(plan.Head.SSHHost.ValueString(), int(plan.GCSPort.ValueInt64()))
	if !creating {
		opts.HeadRunning = state.Head.Alive.ValueBool()
		if sameNodeIP(state.Head, plan.Head) {
			opts.Known[raycluster.HeadName] = state.Head.RegisteredIP.ValueString()
		}
		for name, w := range plan.Workers {
			if old, ok := state.Workers[name]; ok && old.Alive.ValueBool() && sameNode(old, w) {
				opts.Known[name] = old.RegisteredIP.ValueString()
			}
		}
	}
	// Nothing starts when the cluster is kept and every node in the plan
	// runs as it is: then the checks, which guard starting Ray, warn.
	startsNothing := !creating && opts.HeadRunning && len(opts.Known) == 1+len(plan.Workers)
	// found: checks that guard a start; now: faults of what runs now,
	// which fail the plan even when it starts nothing.
	var found, now diag.Diagnostics
	p, err := r.mgr.PlanCluster(ctx, spec, opts)
	switch {
	case err != nil && faultNow(err):
		now.AddError("Cannot read the nodes for this plan", err.Error())
	case err != nil:
		found.AddError("Cannot read the nodes for this plan", err.Error())
	default:
		addPreflight(&found, guards(p.Diagnostics, false))
		addPreflight(&now, guards(p.Diagnostics, true))
	}
	if startsNothing && (found.HasError() || now.HasError()) {
		resp.Diagnostics.Append(keptRunning(found)...)
		if resp.Diagnostics.Append(withDestroyHint(now)...); now.HasError() {
			return
		}
		keepFromState(&plan, state)
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	found.Append(now...)
	// On create paths too: a destroy of the rest of the configuration runs
	// this plan in its refresh (a deployment not yet created still plans).
	found = withDestroyHint(found)
	if resp.Diagnostics.Append(found...); resp.Diagnostics.HasError() {
		return
	}
	if !creating && p.HeadIP != state.Head.RegisteredIP.ValueString() {
		// The head would register another address: workers and every
		// client address the cluster by it, so the cluster is replaced.
		resp.RequiresReplace.Append(path.Root("head").AtName("node_ip"))
		creating = true
	}

	plan.ID = plan.Head.SSHHost
	plan.HeadAddress = types.StringValue(net.JoinHostPort(p.HeadIP, strconv.Itoa(spec.GCSPort)))
	// Deployments planned after this cluster, in this run, check against it.
	r.mgr.RecordPlan(plan.HeadAddress.ValueString(), raycluster.Planned{GPUs: p.GPUs, Runtime: spec.Runtime,
		Nodes: p.Nodes, Endpoints: spec.Endpoints(), Env: spec.Env})
	plan.RayVersion = types.StringValue(p.RayVersion)
	planNode := func(name string, n *rayNodeModel, old *rayNodeModel, kept bool) {
		n.RegisteredIP = types.StringValue(p.Registered[name])
		n.Alive = types.BoolValue(true)
		if kept {
			n.keepRunning(old)
		} else {
			n.NodeID = types.StringUnknown()
		}
	}
	var oldHead *rayNodeModel
	if state != nil {
		oldHead = state.Head
	}
	planNode(raycluster.HeadName, plan.Head, oldHead, !creating)
	for name, w := range plan.Workers {
		var old *rayNodeModel
		if state != nil {
			old = state.Workers[name]
		}
		_, kept := opts.Known[name]
		if !creating && old != nil && !old.Alive.ValueBool() {
			resp.Diagnostics.AddAttributeWarning(path.Root("workers").AtMapKey(name), "Ray worker is not alive",
				fmt.Sprintf("worker %s is not alive in Ray's node table; apply will restart Ray on it and wait until it registers as %s.",
					nodeNotAlive(name, old), p.Registered[name]))
		}
		planNode(name, w, old, kept)
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
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

// sameCustom: the node's custom resources and labels are planned as they run.
func sameCustom(old, n *rayNodeModel) bool {
	return (n.Resources.IsUnknown() || old.Resources.Equal(n.Resources)) && (n.Labels.IsUnknown() || old.Labels.Equal(n.Labels))
}

// keepFromState plans a cluster that changes nothing as the state has it.
func keepFromState(plan, state *clusterModel) {
	plan.ID, plan.HeadAddress, plan.RayVersion = state.ID, state.HeadAddress, state.RayVersion
	keep := func(n, old *rayNodeModel) {
		n.RegisteredIP, n.Alive = old.RegisteredIP, old.Alive
		n.keepRunning(old)
	}
	keep(plan.Head, state.Head)
	for name, w := range plan.Workers {
		keep(w, state.Workers[name])
	}
}

// keepRunning plans a node whose Ray keeps running: its node ID, and what
// Ray registered where the configuration leaves it to Ray.
func (n *rayNodeModel) keepRunning(old *rayNodeModel) {
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
	return sameEndpoint(a, b) && sameNodeIP(a, b) &&
		(b.NumGPUs.IsUnknown() || a.NumGPUs.Equal(b.NumGPUs)) && sameCustom(a, b)
}

func (r *rayClusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Create(ctx, 15*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	spec, diags := plan.spec(ctx)
	resp.Diagnostics.Append(diags...)
	spec.SecretEnv = secretEnv(ctx, req.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	t, found := r.mgr.Create(ctx, spec)
	if addPreflight(&resp.Diagnostics, found); resp.Diagnostics.HasError() {
		return
	}
	fill(&plan, t)
	plan.ID = plan.Head.SSHHost
	plan.SecretEnvWO = types.MapNull(types.StringType) // write-only: never in state
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// secretEnv reads the write-only secret_env_wo from the configuration: the
// only place it ever is.
func secretEnv(ctx context.Context, cfg tfsdk.Config, diags *diag.Diagnostics) map[string]string {
	var m types.Map
	diags.Append(cfg.GetAttribute(ctx, path.Root("secret_env_wo"), &m)...)
	out := map[string]string{}
	if !m.IsNull() && !m.IsUnknown() {
		diags.Append(m.ElementsAs(ctx, &out, false)...)
	}
	return out
}

// fill copies Ray's node table into the model: nodes are matched by the IP
// they registered.
func fill(m *clusterModel, t ray.Table) {
	m.RayVersion = types.StringValue(t.RayVersion)
	m.HeadAddress = types.StringValue(m.gcsAddr())
	if n, ok := t.Alive(m.Head.RegisteredIP.ValueString()); ok {
		m.Head.observe(n)
	} else {
		m.Head.Alive = types.BoolValue(false)
	}
	for _, w := range m.Workers {
		if n, ok := t.Alive(w.RegisteredIP.ValueString()); ok {
			w.observe(n)
			continue
		}
		w.Alive = types.BoolValue(false)
		if w.NodeID.IsUnknown() {
			w.NodeID = types.StringNull()
		}
		if w.NumGPUs.IsUnknown() {
			w.NumGPUs = types.Int64Null()
		}
		if w.Resources.IsUnknown() {
			w.Resources = types.MapNull(types.Float64Type)
		}
		if w.Labels.IsUnknown() {
			w.Labels = types.MapNull(types.StringType)
		}
	}
}

// Read refreshes the state from Ray's node table; an imported state is
// first completed from what runs (raycluster.Discover).
func (r *rayClusterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	var state clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	spec, diags := state.spec(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	if state.Head.RegisteredIP.IsNull() || state.Head.RegisteredIP.IsUnknown() {
		d, found := r.mgr.Discover(ctx, spec)
		adoptCluster(&state, d)
		if addPreflight(&resp.Diagnostics, found); resp.Diagnostics.HasError() {
			return
		}
	}
	t, err := r.mgr.Snapshot(ctx, spec, state.gcsAddr())
	if err != nil {
		// Unreachable is not gone: keep the state, say why.
		resp.Diagnostics.AddError("Cannot read the Ray cluster", err.Error()+goneHint)
		return
	}
	if !t.GCSUp {
		gone, warning := gcsDown(&state, t)
		resp.Diagnostics.Append(warning)
		if gone {
			resp.State.RemoveResource(ctx)
		} else {
			resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
		}
		return
	}
	fill(&state, t)
	resp.Diagnostics.Append(notAliveWarnings(&state)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// gcsDown is the warning for a head whose GCS did not answer, and whether
// the cluster is gone (the GCS is known to be: nothing listens on its
// port) and leaves the state. Slow or unreachable is not gone: the state
// is kept, and the plan (whose checks warn when nothing changes) goes on.
func gcsDown(state *clusterModel, t ray.Table) (gone bool, warning diag.Diagnostic) {
	if !t.GCSGone() {
		return false, diag.NewWarningDiagnostic("Ray's GCS did not answer",
			fmt.Sprintf("The head's GCS at %s did not answer (%s); the state is kept as it was. If the cluster is really gone, "+
				"the next plan that can reach it says so.", state.gcsAddr(), t.GCSError))
	}
	return true, diag.NewWarningDiagnostic("Ray cluster is gone",
		fmt.Sprintf("The head's GCS at %s does not answer (%s): the cluster will be created again.", state.gcsAddr(), t.GCSError))
}

// notAliveWarnings warns of the nodes a refresh found not alive in Ray's
// node table: the plan replaces the cluster of a dead head, and restarts
// dead workers.
func notAliveWarnings(state *clusterModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if !state.Head.Alive.ValueBool() {
		// The GCS answers but the head's raylet is dead: still this
		// resource's cluster (its GCS holds the port), which the plan
		// replaces. Dropped from state, it would be a Ray no state knows,
		// which the next plan must refuse to touch.
		diags.AddWarning("Ray head is not alive",
			fmt.Sprintf("No alive node is registered as %s in the cluster at %s, whose GCS still answers: the plan replaces the cluster.",
				state.Head.RegisteredIP.ValueString(), state.gcsAddr()))
	}
	var dead []string
	for name, w := range state.Workers {
		if !w.Alive.ValueBool() {
			dead = append(dead, nodeNotAlive(name, w))
		}
	}
	if len(dead) > 0 {
		sort.Strings(dead)
		diags.AddWarning("Ray workers not alive", "Not alive in Ray's node table: "+strings.Join(dead, "; ")+
			". The plan restarts them.")
	}
	return diags
}

// adoptCluster fills an imported state with what raycluster.Discover read
// of the running cluster; what Ray does not report is taken as the
// defaults a create would have used.
func adoptCluster(m *clusterModel, d raycluster.Discovered) {
	m.GCSPort = types.Int64Value(int64(d.GCSPort))
	m.Head.RegisteredIP = types.StringValue(d.HeadIP)
	for name, ip := range d.Workers {
		m.Workers[name].RegisteredIP = types.StringValue(ip)
	}
	if m.DashboardHost.IsNull() {
		m.DashboardHost = types.StringValue("127.0.0.1")
	}
	m.AuthMode = types.StringValue("disabled")
	if d.AuthToken {
		m.AuthMode = types.StringValue("token")
	}
}

// Update restarts the workers whose Ray-facing settings changed (or that
// are not alive), starts the added ones and stops the removed ones
// (raycluster.Reconcile); the head keeps running.
func (r *rayClusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.Append(clearImported(ctx, resp.Private)...)
	var plan, state clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, 15*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	spec, d1 := plan.spec(ctx)
	old, d2 := state.spec(ctx)
	resp.Diagnostics.Append(d1...)
	resp.Diagnostics.Append(d2...)
	// Workers this update starts get the same secret environment.
	spec.SecretEnv = secretEnv(ctx, req.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	t, found := r.mgr.Reconcile(ctx, clusterUpdate(&plan, &state, spec, old))
	if addPreflight(&resp.Diagnostics, found); resp.Diagnostics.HasError() {
		return
	}
	plan.Head.NodeID = state.Head.NodeID
	fill(&plan, t)
	plan.SecretEnvWO = types.MapNull(types.StringType)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// clusterUpdate decides, from the plan and the state, what an update does
// to each worker: Ray stops on a worker removed, changed (sameNode) or not
// alive, and starts on one added, changed or not alive. The auth token
// goes with a worker that leaves its node or SSH user (sameEndpoint), and
// a worker handed to another SSH user of the same host leaves its session
// first.
func clusterUpdate(plan, state *clusterModel, spec, old raycluster.Spec) raycluster.Update {
	u := raycluster.Update{Old: old, New: spec, HeadIP: state.Head.RegisteredIP.ValueString(),
		Stop: map[string]raycluster.StopWorker{}, Want: map[string]string{}}
	for name, w := range state.Workers {
		nw, ok := plan.Workers[name]
		if ok && sameNode(w, nw) && w.Alive.ValueBool() {
			continue
		}
		u.Stop[name] = raycluster.StopWorker{RegisteredIP: w.RegisteredIP.ValueString(),
			RemoveToken:  !ok || !sameEndpoint(w, nw),
			LeaveSession: ok && w.SSHHost.Equal(nw.SSHHost) && !w.SSHUser.Equal(nw.SSHUser)}
	}
	for name, w := range plan.Workers {
		u.Want[name] = w.RegisteredIP.ValueString()
		if ow, ok := state.Workers[name]; !ok || !sameNode(ow, w) || !ow.Alive.ValueBool() {
			u.Start = append(u.Start, name)
		}
	}
	sort.Strings(u.Start)
	return u
}

// Delete stops Ray on every node (raycluster.Destroy). Every error ends
// with the way out for a node that is gone for good.
func (r *rayClusterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, 5*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	spec, diags := state.spec(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	var found diag.Diagnostics
	addPreflight(&found, r.mgr.Destroy(ctx, spec, state.gcsAddr()))
	resp.Diagnostics.Append(withGoneHint(found)...)
}

// ImportState takes the head's ssh_host, optionally followed by workers as
// name=ssh_host pairs: "10.1.230.180,spark2=10.1.230.181". The GCS address
// is read from the head; workers are matched to Ray's node table by their
// addresses.
func (r *rayClusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	parts := strings.Split(req.ID, ",")
	head := strings.TrimSpace(parts[0])
	if head == "" {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("import ID %q: want <head ssh_host>[,<worker name>=<worker ssh_host>...], e.g. \"10.1.230.180,spark2=10.1.230.181\"", req.ID))
		return
	}
	m := clusterModel{ID: types.StringValue(head), GCSPort: types.Int64Value(6379), AuthMode: types.StringNull(),
		Env: types.MapNull(types.StringType), SecretEnvWO: types.MapNull(types.StringType), SecretEnvVer: types.Int64Null(),
		StartArgs: types.ListNull(types.StringType), DashboardHost: types.StringNull(),
		HeadAddress: types.StringNull(), RayVersion: types.StringNull()}
	m.Head = emptyNode(head)
	for _, p := range parts[1:] {
		name, host, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || name == "" || host == "" {
			resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("import ID part %q: want <worker name>=<worker ssh_host>", p))
			return
		}
		if m.Workers == nil {
			m.Workers = map[string]*rayNodeModel{}
		}
		m.Workers[name] = emptyNode(host)
	}
	m.Timeouts = timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{
		"create": types.StringType, "update": types.StringType, "delete": types.StringType})}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	resp.Diagnostics.Append(markImported(ctx, resp.Private)...)
}

func emptyNode(host string) *rayNodeModel {
	return &rayNodeModel{
		NodeAccess: providerdata.NodeAccess{SSHHost: types.StringValue(host), SSHPort: types.Int64Null(),
			SSHUser: types.StringNull(), HostKey: types.StringNull()},
		NodeIP: types.StringNull(), NumGPUs: types.Int64Null(), Resources: types.MapNull(types.Float64Type),
		Labels: types.MapNull(types.StringType), RegisteredIP: types.StringNull(), NodeID: types.StringNull(), Alive: types.BoolNull(),
	}
}
