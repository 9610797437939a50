package resources

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/mpdeploy"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/supervise"
)

var (
	_ resource.ResourceWithModifyPlan = (*mpResource)(nil)
	_ resource.ResourceWithConfigure  = (*mpResource)(nil)
)

// NewVLLMMPDeployment is the spark_vllm_mp_deployment resource: vLLM's own
// multi-node mode, with no Ray. A resource of its own rather than a mode
// of spark_vllm_deployment: it has nodes where that one has a Ray head and
// a ray_address, and none of Ray's attributes apply to it.
func NewVLLMMPDeployment() resource.Resource { return &mpResource{} }

type mpResource struct {
	dep *mpdeploy.Manager
}

func (r *mpResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_vllm_mp_deployment"
}

func (r *mpResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	data, diags := providerdata.From(req.ProviderData)
	resp.Diagnostics.Append(diags...)
	if data != nil {
		r.dep = &mpdeploy.Manager{Pool: data.Pool}
	}
}

// launch starts every rank through mpdeploy.Launch (which leaves nothing
// running when it fails) and fills in what a create or update writes.
func (r *mpResource) launch(ctx context.Context, m *mpModel, sec mpdeploy.Secrets, diags *diag.Diagnostics) {
	spec, d := m.spec(ctx)
	if diags.Append(d...); diags.HasError() {
		return
	}
	ids, found := r.dep.Launch(ctx, spec, sec)
	if addPreflight(diags, found); diags.HasError() {
		return
	}
	for name, n := range m.Nodes {
		n.ProcessIdentity = types.StringValue(ids[name])
	}
	m.Status = types.StringValue(mpdeploy.Serving)
	r.applyFabric(ctx, m, spec)
	m.APIKeyWO, m.SecretEnvWO = types.StringNull(), types.MapNull(types.StringType) // write-only: never in state
}

// mpSecrets are the write-only values as internal/mpdeploy takes them.
func mpSecrets(ctx context.Context, cfg interface {
	GetAttribute(context.Context, path.Path, any) diag.Diagnostics
}, diags *diag.Diagnostics) mpdeploy.Secrets {
	sec := readSecrets(ctx, cfg, diags)
	return mpdeploy.Secrets{APIKey: sec.apiKey, Env: sec.env}
}

func (r *mpResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m mpModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := m.Timeouts.Create(ctx, 60*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if r.launch(ctx, &m, mpSecrets(ctx, req.Config, &resp.Diagnostics), &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *mpResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	var m mpModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.Restart.IsNull() {
		// State from before restart existed: its ranks run detached.
		m.Restart = types.StringValue(supervise.No)
	}
	spec, diags := m.spec(ctx)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	status, now, found := r.dep.Status(ctx, spec, m.identities())
	d := preflightDiags(found)
	if d.HasError() {
		resp.Diagnostics.Append(withGoneHint(d)...) // state kept
		return
	}
	// Warnings: a rank systemd restarted since the apply, which runs under
	// the identity it has now.
	resp.Diagnostics.Append(d...)
	for name, n := range m.Nodes {
		n.ProcessIdentity = types.StringValue(now[name])
	}
	if status == mpdeploy.Busy {
		// A server under load answers /health late: kept, not restarted.
		status = mpdeploy.Serving
		resp.Diagnostics.AddWarning("vLLM answered /health late", fmt.Sprintf("Rank 0 of %s runs but did not answer /health "+
			"within 10 s; the plan keeps it, as a busy server answers late.", m.ID.ValueString()))
	}
	m.Status = types.StringValue(status)
	if status != mpdeploy.Serving {
		resp.Diagnostics.AddWarning("vLLM is not serving", fmt.Sprintf("%s: %s. vLLM cannot take a rank back into a running "+
			"set, so the apply restarts every rank, rank 0 first; a unit changed or disabled by hand while its rank runs is "+
			"written again instead, restarting nothing.", m.ID.ValueString(), status))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *mpResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state mpModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, 60*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	repaired := false
	if state.Status.ValueString() != mpdeploy.Serving && !mpChanged(ctx, &state, &plan) {
		// The set drifted, the configuration did not: a unit edited or
		// disabled by hand while its rank runs is written again in place.
		if spec, d := plan.spec(ctx); !d.HasError() {
			repaired = r.dep.RepairInPlace(ctx, spec, state.identities())
		}
	}
	if repaired || !mpRestarts(ctx, &state, &plan) {
		// Only what restarts nothing changed (a host_key, timeouts), or
		// the units were repaired in place.
		for name, n := range plan.Nodes {
			n.ProcessIdentity = state.Nodes[name].ProcessIdentity
		}
		plan.APIKeyWO, plan.SecretEnvWO = types.StringNull(), types.MapNull(types.StringType)
		if spec, d := plan.spec(ctx); !d.HasError() { // fabric_probe set or changed: measured now
			r.applyFabric(ctx, &plan, spec)
		}
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	}
	if r.stop(ctx, &state, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	if r.launch(ctx, &plan, mpSecrets(ctx, req.Config, &resp.Diagnostics), &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *mpResource) stop(ctx context.Context, m *mpModel, diags *diag.Diagnostics) {
	spec, d := m.spec(ctx)
	if diags.Append(d...); diags.HasError() {
		return
	}
	diags.Append(withGoneHint(preflightDiags(r.dep.Stop(ctx, spec, m.identities())))...)
}

func (r *mpResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m mpModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := m.Timeouts.Delete(ctx, 5*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.stop(ctx, &m, &resp.Diagnostics)
}

// ModifyPlan plans the computed values and runs every rule against the
// nodes. A plan that starts nothing (no change, the set serving) turns the
// rules that only guard a start into warnings, so it never blocks a
// destroy or a no-change plan.
func (r *mpResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	if req.Plan.Raw.IsNull() || r.dep == nil {
		return
	}
	var plan, config mpModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.planComputed(&config)
	// ours: this deployment has processes, which an apply stops before it
	// starts the set again, so the ports they hold are its own (Launch
	// checks again once they are stopped). starts: the apply (re)starts
	// the ranks.
	var state *mpModel
	ours := false
	if !req.State.Raw.IsNull() {
		state = &mpModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
		if r0 := state.rank0(); r0 != nil {
			ours = r0.ProcessIdentity.ValueString() != ""
		}
	}
	spec, diags := plan.spec(ctx)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	var found, probed []finding.Finding
	if spec.Known() {
		var version string
		version, found = r.dep.Check(ctx, spec, ours)
		if version != "" {
			plan.VLLMVersion = types.StringValue(version)
		}
		_, probed = r.measureFabric(ctx, &plan, spec)
	}
	planMPFabric(state, &plan, spec)
	// Every rank starts anew (new processes), or keeps running: the
	// framework plans a computed value unknown on any change, so the
	// running processes are planned back from the state.
	starts := mpRestarts(ctx, state, &plan)
	for name, n := range plan.Nodes {
		n.ProcessIdentity = types.StringUnknown()
		if was, ok := state.nodes()[name]; ok && !starts {
			n.ProcessIdentity = was.ProcessIdentity
		}
	}
	d := preflightDiags(found)
	if !starts {
		d = startGuardsAsWarnings(d)
	}
	// A link under its floor is a fault now, whatever the plan starts.
	d.Append(preflightDiags(probed)...)
	if resp.Diagnostics.Append(withDestroyHint(d)...); resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}
