package resources

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/planmemo"
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
	mgr  *raycluster.Manager
	memo *planmemo.Memo // what this run's plans concluded: the deployments planned after the cluster read it
}

func (r *rayClusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_ray_cluster"
}

func (r *rayClusterResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	data, diags := providerdata.From(req.ProviderData)
	resp.Diagnostics.Append(diags...)
	if data != nil {
		r.mgr, r.memo = data.Clusters, data.Memo
	}
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
	r.applyFabric(ctx, &plan, spec)
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
	r.applyFabric(ctx, &plan, spec)
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
		u.Stop[name] = raycluster.StopWorker{RegisteredIP: w.RegisteredIP.ValueString(), NodeID: w.NodeID.ValueString(),
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
	head, workers, err := parseClusterImportID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID", err.Error())
		return
	}
	resp.Diagnostics.Append(setImported(ctx, &resp.State, importedCluster(head, workers))...)
	resp.Diagnostics.Append(markImported(ctx, resp.Private)...)
}

// parseClusterImportID splits a cluster's import ID into the head's
// ssh_host and the workers' (by name); nil workers when it names none.
func parseClusterImportID(id string) (head string, workers map[string]string, err error) {
	parts := strings.Split(id, ",")
	head = strings.TrimSpace(parts[0])
	if head == "" {
		return "", nil, fmt.Errorf("import ID %q: want <head ssh_host>[,<worker name>=<worker ssh_host>...], e.g. \"10.1.230.180,spark2=10.1.230.181\"", id)
	}
	for _, p := range parts[1:] {
		name, host, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || name == "" || host == "" {
			return "", nil, fmt.Errorf("import ID part %q: want <worker name>=<worker ssh_host>", p)
		}
		if workers == nil {
			workers = map[string]string{}
		}
		workers[name] = host
	}
	return head, workers, nil
}

// importedCluster is what an import knows before Read: the nodes' SSH
// hosts and Ray's default GCS port. Read discovers the rest.
func importedCluster(head string, workers map[string]string) []imported {
	known := []imported{{path.Root("id"), head}, {path.Root("gcs_port"), int64(6379)}, {path.Root("head").AtName("ssh_host"), head}}
	for _, name := range slices.Sorted(maps.Keys(workers)) {
		known = append(known, imported{path.Root("workers").AtMapKey(name).AtName("ssh_host"), workers[name]})
	}
	return known
}
