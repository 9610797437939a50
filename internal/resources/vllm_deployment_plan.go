package resources

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/inputs"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
)

// check runs vllmdeploy.Check and turns its findings into diagnostics.
func (r *vllmResource) check(ctx context.Context, m *vllmModel, own float64, ownPort, restart bool, diags *diag.Diagnostics) preflight.Concluded {
	spec, d := m.spec(ctx)
	if diags.Append(d...); diags.HasError() {
		return preflight.Concluded{}
	}
	spec.Restart = restart
	concluded, found := r.dep.Check(ctx, spec, own, ownPort)
	addPreflight(diags, found)
	return concluded
}

// ModifyPlan plans what the server will be: its computed values, and what
// the placement rules conclude on the head (planPlacement), unknown while
// the cluster it joins is planned in this run.
func (r *vllmResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	if req.Plan.Raw.IsNull() || r.dep == nil {
		return
	}
	var plan, config vllmModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	planComputed(&plan, &config)
	// Again here: at validate, ray_address is unknown when it comes from
	// the cluster's head_address.
	var port diag.Diagnostics
	checkServePort(plan, &port)
	if resp.Diagnostics.Append(withDestroyHint(port)...); resp.Diagnostics.HasError() {
		return
	}
	var state *vllmModel
	if !req.State.Raw.IsNull() {
		state = &vllmModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
	}
	if placementUnknown(&config) {
		// The cluster is being created in this plan: the same check runs at apply, before launch.
		planUnknownPlacement(&plan)
	} else if !r.planPlacement(ctx, &plan, state, &resp.Diagnostics) {
		return
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// planComputed plans the values that follow from the configuration alone:
// the served name, the ID and endpoint, and the status a plan promises.
// The served name left out of the configuration is the model's, also when
// the state has another (Terraform's proposal keeps the state's value of
// a computed attribute the configuration drops, and the server would keep
// serving the old name). A name the configuration takes from a value not
// known yet stays unknown.
func planComputed(plan, config *vllmModel) {
	if (plan.ServedModelName.IsUnknown() || config.ServedModelName.IsNull()) && !plan.Model.IsUnknown() && !config.ServedModelName.IsUnknown() {
		plan.ServedModelName = types.StringValue(vllm.ServedName(config.ServedModelName.ValueString(), plan.Model.ValueString()))
	}
	if !plan.Head.SSHHost.IsUnknown() && !plan.Port.IsUnknown() {
		plan.ID = types.StringValue(net.JoinHostPort(plan.Head.SSHHost.ValueString(), strconv.FormatInt(plan.Port.ValueInt64(), 10)))
		plan.Endpoint = plan.endpoint()
	}
	plan.Status = types.StringValue(statusServing)
}

// placementUnknown: something the placement rules read is not known yet
// (the cluster is planned in this run); they run at apply, before launch.
func placementUnknown(config *vllmModel) bool {
	return unknownAny(config.RayAddress, config.Head.SSHHost, config.HostIP, config.Model, config.TP, config.PP) || config.Env.IsUnknown()
}

// planUnknownPlacement plans what the placement rules conclude, and the
// process, as known only after apply.
func planUnknownPlacement(plan *vllmModel) {
	plan.PlacementIP = types.StringUnknown()
	plan.VLLMVersion, plan.Executor, plan.PlacementPinned = types.StringUnknown(), types.StringUnknown(), types.BoolUnknown()
	plan.ProcessIdentity = types.StringUnknown()
}

// planPlacement runs the placement rules on the head and plans what they
// conclude. A failing rule is an error, unless the plan launches nothing
// (keepsServing): then it warns, and the last plan's conclusions stand.
// False: an error was reported, and the plan is not set.
func (r *vllmResource) planPlacement(ctx context.Context, plan, state *vllmModel, diags *diag.Diagnostics) bool {
	var found diag.Diagnostics
	concluded := r.check(ctx, plan, ownGPUs(state), ownGPUs(state) > 0 && state.Port.Equal(plan.Port), state != nil, &found)
	if found.HasError() && keepsServing(state, plan) {
		// The placement rules guard a launch, and this plan launches
		// nothing: the server keeps serving, the finding is a warning, and
		// what the last plan concluded stands.
		diags.Append(startGuardsAsWarnings(found)...)
		keepConcluded(plan, state)
		return true
	}
	// On create paths too: a destroy of the rest of the configuration runs
	// this plan in its refresh (a deployment not yet created still plans).
	found = withDestroyHint(found)
	if diags.Append(found...); diags.HasError() {
		return false
	}
	setConcluded(concluded, plan)
	if keepsServing(state, plan) {
		plan.ProcessIdentity = state.ProcessIdentity
	} else {
		plan.ProcessIdentity = types.StringUnknown()
	}
	return true
}

// keepsServing: a server serves and the plan changes nothing it was
// started with, so it keeps running as it is.
func keepsServing(state, plan *vllmModel) bool {
	return state != nil && !needsRestart(state, plan) && state.Status.ValueString() == statusServing
}

// keepConcluded plans what the last plan concluded, and the running
// process, as the state has them.
func keepConcluded(plan, state *vllmModel) {
	plan.PlacementIP, plan.VLLMVersion, plan.Executor, plan.PlacementPinned =
		state.PlacementIP, state.VLLMVersion, state.Executor, state.PlacementPinned
	plan.ProcessIdentity = state.ProcessIdentity
}

// ValidateConfig runs the checks that compare attributes with each other.
// Only the attributes these checks read are read: others (runtime, head)
// are often unknown at validate, being references to the cluster.
func (r *vllmResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m vllmModel
	for name, dst := range map[string]any{"port": &m.Port, "ray_address": &m.RayAddress, "host": &m.Host,
		"api_key_wo": &m.APIKeyWO, "api_key_file": &m.APIKeyFile, "env": &m.Env, "secret_env_wo": &m.SecretEnvWO} {
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root(name), dst)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	checkServePort(m, &resp.Diagnostics)
	warnOpenWithoutKey(ctx, m, &resp.Diagnostics)
}

// warnOpenWithoutKey: vLLM on every address of the head with no key
// serves (and runs) anything asked of it for anyone who reaches the port.
func warnOpenWithoutKey(ctx context.Context, m vllmModel, diags *diag.Diagnostics) {
	if m.Host.IsUnknown() || !m.APIKeyWO.IsNull() || !m.APIKeyFile.IsNull() || m.SecretEnvWO.IsUnknown() {
		return
	}
	if a, err := netip.ParseAddr(hostOf(&m)); err != nil || !a.IsUnspecified() {
		return
	}
	env := map[string]types.String{}
	if !m.SecretEnvWO.IsNull() {
		diags.Append(m.SecretEnvWO.ElementsAs(ctx, &env, false)...)
	}
	if _, ok := env["VLLM_API_KEY"]; ok {
		return
	}
	diags.AddAttributeWarning(path.Root("host"), "vLLM listens on every address of the head without an API key",
		fmt.Sprintf("host = %q and no api_key_wo or api_key_file: anyone who reaches the head's port can use the model. "+
			"Set api_key_wo (or api_key_file), or host = \"127.0.0.1\" to keep the server to the head itself.", hostOf(&m)))
}

// checkServePort refuses a port that is the head's GCS port (known values only;
// a null port is vLLM's default, 8000).
func checkServePort(m vllmModel, diags *diag.Diagnostics) {
	if unknownAny(m.Port, m.RayAddress) {
		return
	}
	port := int64(8000)
	if !m.Port.IsNull() {
		port = m.Port.ValueInt64()
	}
	if err := inputs.ServePort(port, m.RayAddress.ValueString()); err != nil {
		diags.AddAttributeError(path.Root("port"), "vLLM port is the Ray head's GCS port", err.Error())
	}
}
