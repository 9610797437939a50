package resources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
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
	// The same checks as the plan, now with every value known, before anything starts.
	p, err := r.mgr.PlanCluster(ctx, spec, raycluster.PlanOptions{})
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the nodes", err.Error())
		return
	}
	addPreflight(&resp.Diagnostics, p.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	holder := raycluster.Holder()
	release, err := r.mgr.Lock(ctx, holder, allEndpoints(spec)...)
	if err != nil {
		resp.Diagnostics.AddError("Cannot lock the nodes", err.Error())
		return
	}
	defer release()
	gcsAddr := net.JoinHostPort(p.HeadIP, strconv.Itoa(spec.GCSPort))
	if p.StopOrphan {
		// A create of this cluster was killed before it could roll back:
		// its Ray holds the port (the plan said so); replace it.
		if err := r.mgr.Stop(ctx, spec, spec.Head, gcsAddr); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("head"), "Cannot stop the Ray an unfinished create left", err.Error())
			return
		}
	}
	// The marker lives until this create has finished or rolled back: if
	// this provider is killed first, the next plan knows the Ray it finds.
	if err := r.mgr.MarkStarting(ctx, spec, holder); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("head"), "Cannot write the start marker", err.Error())
		return
	}

	// The head counts as started from the moment its ray start is sent: an
	// apply interrupted while it runs (Ctrl-C cancels ctx) stops it too.
	started := []raycluster.NodeSpec{spec.Head}
	rollback := func() {
		// Nothing half-started: stop what this apply started, workers first,
		// even when the apply was cancelled (bounded, on a fresh context).
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		stopped := true
		defer func() {
			if stopped {
				_ = r.mgr.ClearStarting(bg, spec)
				for _, n := range started {
					r.removeToken(bg, spec, n, &resp.Diagnostics)
				}
			}
		}()
		for i := len(started) - 1; i >= 0; i-- {
			if err := r.mgr.Stop(bg, spec, started[i], gcsAddr); err != nil {
				stopped = false
				tflog.Warn(ctx, "rollback: could not stop Ray", map[string]any{"node": started[i].Name, "error": err.Error()})
				resp.Diagnostics.AddWarning("Rollback could not stop Ray on "+started[i].Name,
					fmt.Sprintf("%v\n\nRay may still run on %s (%s). The start marker stays on the head, so the next apply "+
						"recognises what this one left and replaces it once the node answers.", err, started[i].Name, started[i].Endpoint.Host))
			}
		}
	}
	if err := r.mgr.Start(ctx, spec, spec.Head, "", p.HeadIP, ""); err != nil {
		rollback()
		resp.Diagnostics.AddAttributeError(path.Root("head"), "Cannot start the Ray head", err.Error())
		return
	}
	want := map[string]string{raycluster.HeadName: p.HeadIP}
	if _, err := r.mgr.WaitRegistered(ctx, spec, gcsAddr, want, p.Hostnames); err != nil {
		rollback()
		resp.Diagnostics.AddAttributeError(path.Root("head"), "Ray head did not register as planned", err.Error())
		return
	}
	token, err := r.token(ctx, spec)
	if err != nil {
		rollback()
		resp.Diagnostics.AddAttributeError(path.Root("auth_mode"), "Cannot read the cluster's auth token", err.Error())
		return
	}
	if errs := r.startWorkers(ctx, spec, spec.WorkerNames(), p.HeadIP, p.Registered, token, true); len(errs) > 0 {
		for _, name := range spec.WorkerNames() {
			started = append(started, spec.Workers[name])
		}
		rollback()
		for name, err := range errs {
			resp.Diagnostics.AddAttributeError(path.Root("workers").AtMapKey(name), "Cannot start Ray worker", err.Error())
		}
		return
	}
	for _, name := range spec.WorkerNames() {
		started = append(started, spec.Workers[name])
		want[name] = p.Registered[name]
	}
	t, err := r.mgr.WaitRegistered(ctx, spec, gcsAddr, want, p.Hostnames)
	if err != nil {
		rollback()
		var reg *raycluster.RegistrationError
		summary := "Ray workers did not register as planned"
		if errors.As(err, &reg) && reg.Node != raycluster.HeadName {
			resp.Diagnostics.AddAttributeError(path.Root("workers").AtMapKey(reg.Node), summary, err.Error())
		} else {
			resp.Diagnostics.AddError(summary, err.Error())
		}
		return
	}
	fill(&plan, t)
	plan.ID = plan.Head.SSHHost
	plan.SecretEnvWO = types.MapNull(types.StringType) // write-only: never in state
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if err := r.mgr.ClearStarting(ctx, spec); err != nil {
		resp.Diagnostics.AddWarning("Cannot remove the start marker",
			fmt.Sprintf("%v\n\nThe cluster is created. A later plan that finds this cluster's Ray without state would take it for an "+
				"unfinished create's and replace it.", err))
	}
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

// startWorkers starts Ray on the named workers in parallel. Any Ray already
// on a worker is stopped first: the node is about to join this cluster, and
// a raylet left from a cluster that is gone would hold its ports.
func (r *rayClusterResource) startWorkers(ctx context.Context, spec raycluster.Spec, names []string, headIP string, registered map[string]string, token string, clean bool) map[string]error {
	var mu sync.Mutex
	errs := map[string]error{}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			w := spec.Workers[name]
			var err error
			if clean {
				err = r.mgr.Stop(ctx, spec, w, net.JoinHostPort(headIP, strconv.Itoa(spec.GCSPort)))
			}
			if err == nil {
				err = r.mgr.Start(ctx, spec, w, headIP, registered[name], token)
			}
			if err != nil {
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// token reads the cluster's auth token from the head when token
// authentication is on: workers get it on stdin, state never sees it.
func (r *rayClusterResource) token(ctx context.Context, spec raycluster.Spec) (string, error) {
	if !spec.AuthToken {
		return "", nil
	}
	t, err := r.mgr.ReadToken(ctx, spec)
	if err == nil && t == "" {
		err = errors.New("the head has no token at ~/.ray/auth_token")
	}
	return t, err
}

func allEndpoints(specs ...raycluster.Spec) []transport.Endpoint {
	var out []transport.Endpoint
	for _, s := range specs {
		out = append(out, s.Head.Endpoint)
		for _, name := range s.WorkerNames() {
			out = append(out, s.Workers[name].Endpoint)
		}
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
		resp.Diagnostics.Append(r.discover(ctx, &state, spec)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	t, err := r.mgr.Snapshot(ctx, spec, state.gcsAddr())
	if err != nil {
		// Unreachable is not gone: keep the state, say why.
		resp.Diagnostics.AddError("Cannot read the Ray cluster", err.Error()+goneHint)
		return
	}
	if !t.GCSUp && !t.GCSGone() {
		// Slow or unreachable is not gone: keep the state, and the plan
		// (whose checks warn when nothing changes) goes on.
		resp.Diagnostics.AddWarning("Ray's GCS did not answer",
			fmt.Sprintf("The head's GCS at %s did not answer (%s); the state is kept as it was. If the cluster is really gone, "+
				"the next plan that can reach it says so.", state.gcsAddr(), t.GCSError))
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
		return
	}
	if !t.GCSUp {
		resp.Diagnostics.AddWarning("Ray cluster is gone",
			fmt.Sprintf("The head's GCS at %s does not answer (%s): the cluster will be created again.", state.gcsAddr(), t.GCSError))
		resp.State.RemoveResource(ctx)
		return
	}
	fill(&state, t)
	if !state.Head.Alive.ValueBool() {
		// The GCS answers but the head's raylet is dead: still this
		// resource's cluster (its GCS holds the port), which the plan
		// replaces. Dropped from state, it would be a Ray no state knows,
		// which the next plan must refuse to touch.
		resp.Diagnostics.AddWarning("Ray head is not alive",
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
		resp.Diagnostics.AddWarning("Ray workers not alive", "Not alive in Ray's node table: "+strings.Join(dead, "; ")+
			". The plan restarts them.")
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// discover fills an imported state: the head's GCS address from the file
// Ray keeps on the head, and each named worker's registered IP by matching
// its addresses against the node table.
func (r *rayClusterResource) discover(ctx context.Context, m *clusterModel, spec raycluster.Spec) diag.Diagnostics {
	var diags diag.Diagnostics
	addr, err := r.mgr.CurrentCluster(ctx, spec)
	if err != nil {
		diags.AddError("Cannot import the Ray cluster", err.Error())
		return diags
	}
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	m.GCSPort = types.Int64Value(int64(p))
	m.Head.RegisteredIP = types.StringValue(host)
	spec.GCSPort = p
	t, err := r.mgr.Table(ctx, spec, addr)
	if err != nil || !t.GCSUp {
		diags.AddError("Cannot import the Ray cluster", fmt.Sprintf("reading the node table at %s: %v %s", addr, err, t.GCSError))
		return diags
	}
	for name, w := range m.Workers {
		addrs, err := r.mgr.NodeAddresses(ctx, spec, spec.Workers[name])
		if err != nil {
			diags.AddAttributeError(path.Root("workers").AtMapKey(name), "Cannot import worker", err.Error())
			continue
		}
		for _, a := range addrs {
			if n, ok := t.Alive(a); ok && !n.IsHead {
				w.RegisteredIP = types.StringValue(a)
			}
		}
		if w.RegisteredIP.IsNull() {
			diags.AddAttributeError(path.Root("workers").AtMapKey(name), "Worker is not in the Ray cluster",
				fmt.Sprintf("worker %s (%s) has none of its addresses (%s) registered in the cluster at %s.", name,
					w.SSHHost.ValueString(), strings.Join(addrs, ", "), addr))
		}
	}
	if m.DashboardHost.IsNull() {
		m.DashboardHost = types.StringValue("127.0.0.1")
	}
	m.AuthMode = types.StringValue("disabled")
	if t, err := r.mgr.ReadToken(ctx, spec); err == nil && t != "" {
		m.AuthMode = types.StringValue("token")
	}
	return diags
}

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
	var removed []string
	for name := range state.Workers {
		if _, ok := plan.Workers[name]; !ok {
			removed = append(removed, name)
		}
	}
	sort.Strings(removed)
	resp.Diagnostics.Append(r.dropUnreachable(ctx, &old, removed)...)
	release, err := r.mgr.Lock(ctx, raycluster.Holder(), allEndpoints(spec, old)...)
	if err != nil {
		resp.Diagnostics.AddError("Cannot lock the nodes", err.Error())
		return
	}
	defer release()

	headIP := state.Head.RegisteredIP.ValueString()
	gcsAddr := state.gcsAddr()
	// Workers that go away or change: stop Ray there, and only there.
	var stop, start []string
	for name, w := range state.Workers {
		nw, ok := plan.Workers[name]
		if _, reachable := old.Workers[name]; !reachable {
			continue // removed, unreachable, warned about
		}
		if !ok || !sameNode(w, nw) || !w.Alive.ValueBool() {
			if err := r.mgr.Stop(ctx, old, old.Workers[name], gcsAddr); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("workers").AtMapKey(name), "Cannot stop Ray worker", err.Error())
				return
			}
			if !ok || !sameEndpoint(w, nw) { // the token stays with the Ray it was for: not on a node (or user) it left
				r.removeToken(ctx, old, old.Workers[name], &resp.Diagnostics)
			}
			if ok && w.SSHHost.Equal(nw.SSHHost) && !w.SSHUser.Equal(nw.SSHUser) {
				// Ray starts there as another user, in the same session.
				if err := r.mgr.LeaveSession(ctx, old, old.Workers[name]); err != nil {
					resp.Diagnostics.AddAttributeError(path.Root("workers").AtMapKey(name), "Cannot hand the worker to another SSH user", err.Error())
					return
				}
			}
			stop = append(stop, name)
		}
	}
	for name, w := range plan.Workers {
		if ow, ok := state.Workers[name]; !ok || !sameNode(ow, w) || !ow.Alive.ValueBool() {
			start = append(start, name)
		}
	}
	sort.Strings(start)
	registered := map[string]string{}
	for name, w := range plan.Workers {
		registered[name] = w.RegisteredIP.ValueString()
	}
	token, err := r.token(ctx, spec)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("auth_mode"), "Cannot read the cluster's auth token", err.Error())
		return
	}
	// A failed update takes back the workers it started: state keeps the
	// cluster as it was, and a worker joined under this update's settings
	// would be a Ray no state knows (the next plan starts it again).
	rollback := func() {
		for _, name := range start {
			if err := r.mgr.Stop(context.WithoutCancel(ctx), spec, spec.Workers[name], gcsAddr); err != nil {
				resp.Diagnostics.AddAttributeWarning(path.Root("workers").AtMapKey(name), "Cannot stop a worker this failed update started",
					err.Error()+"\n\nThe next apply stops and starts it again.")
			}
		}
	}
	if errs := r.startWorkers(ctx, spec, start, headIP, registered, token, false); len(errs) > 0 {
		for name, err := range errs {
			resp.Diagnostics.AddAttributeError(path.Root("workers").AtMapKey(name), "Cannot start Ray worker", err.Error())
		}
		rollback()
		return
	}
	want := map[string]string{raycluster.HeadName: headIP}
	for name, w := range plan.Workers {
		want[name] = w.RegisteredIP.ValueString()
	}
	t, err := r.mgr.WaitRegistered(ctx, spec, gcsAddr, want, nil)
	if err != nil {
		resp.Diagnostics.AddError("Ray workers did not register as planned", err.Error())
		rollback()
		return
	}
	// Removed workers must have left the node table.
	for _, name := range stop {
		if _, still := plan.Workers[name]; still {
			continue
		}
		if n, ok := t.Alive(state.Workers[name].RegisteredIP.ValueString()); ok {
			resp.Diagnostics.AddAttributeError(path.Root("workers").AtMapKey(name), "Removed worker is still in the cluster",
				fmt.Sprintf("Ray on %s was stopped but node %s (%s) is still alive in the node table.", name, n.ID, n.IP))
			return
		}
	}
	plan.Head.NodeID = state.Head.NodeID
	fill(&plan, t)
	plan.SecretEnvWO = types.MapNull(types.StringType)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

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
	resp.Diagnostics.Append(r.dropUnreachable(ctx, &spec, spec.WorkerNames())...)
	release, err := r.mgr.Lock(ctx, raycluster.Holder(), allEndpoints(spec)...)
	if err != nil {
		resp.Diagnostics.AddError("Cannot lock the nodes", err.Error()+goneHint)
		return
	}
	defer release()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range spec.WorkerNames() {
		wg.Go(func() {
			if err := r.mgr.Stop(ctx, spec, spec.Workers[name], state.gcsAddr()); err != nil {
				mu.Lock()
				resp.Diagnostics.AddAttributeError(path.Root("workers").AtMapKey(name), "Cannot stop Ray worker", err.Error()+goneHint)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.mgr.Stop(ctx, spec, spec.Head, state.gcsAddr()); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("head"), "Cannot stop the Ray head", err.Error()+goneHint)
		return
	}
	nodes := []raycluster.NodeSpec{spec.Head}
	for _, name := range spec.WorkerNames() {
		nodes = append(nodes, spec.Workers[name])
	}
	for _, n := range nodes {
		r.removeToken(ctx, spec, n, &resp.Diagnostics)
	}
}

// removeToken removes the auth token the provider wrote on a node whose
// Ray it stopped; a failure is a warning naming the node and the file.
func (r *rayClusterResource) removeToken(ctx context.Context, spec raycluster.Spec, n raycluster.NodeSpec, diags *diag.Diagnostics) {
	if !spec.AuthToken || spec.Runtime.Container != nil {
		return // in a container, the token went with it
	}
	if err := r.mgr.RemoveToken(ctx, spec, n); err != nil {
		diags.AddWarning("Ray auth token left on "+n.Name,
			fmt.Sprintf("Ray is stopped on %s (%s), but its auth token (~/.ray/auth_token of the SSH user) could not be removed: %v. "+
				"Remove it by hand when no other Ray of that user runs there.", n.Name, n.Endpoint.Host, err))
	}
}

// dropUnreachable takes the named workers that cannot be reached at all out
// of spec, with a warning each: a worker that is being removed, or whose
// cluster is being destroyed, must not hold the operation hostage. Ray on
// such a worker, if it still runs, stops by itself once it has lost its
// head's GCS for gcs_rpc_server_reconnect_timeout_s (60 s by default, Ray's
// src/ray/common/ray_config_def.h); and it is no longer in state.
func (r *rayClusterResource) dropUnreachable(ctx context.Context, spec *raycluster.Spec, names []string) diag.Diagnostics {
	var diags diag.Diagnostics
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			_, errs[i] = r.mgr.Pool.Get(ctx, spec.Workers[name].Endpoint)
		})
	}
	wg.Wait()
	for i, name := range names {
		if !transport.Unreachable(errs[i]) {
			continue
		}
		diags.AddAttributeWarning(path.Root("workers").AtMapKey(name), "Worker unreachable: Ray on it was not stopped",
			fmt.Sprintf("%v.\n\nWorker %s is removed from state anyway. If Ray still runs there, it stops by itself about a minute "+
				"after it loses the head; if the node comes back with Ray running, run `ray stop` there. The Ray auth token the provider "+
				"wrote there (~/.ray/auth_token) stays until a cluster of this provider uses the node again and is destroyed, or "+
				"you remove it.", errs[i], name))
		delete(spec.Workers, name)
	}
	return diags
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
