package resources

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
	"github.com/lab-infra/terraform-provider-spark/internal/vllmdeploy"
)

var (
	_ resource.ResourceWithValidateConfig = (*vllmResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*vllmResource)(nil)
	_ resource.ResourceWithImportState    = (*vllmResource)(nil)
	_ resource.ResourceWithConfigure      = (*vllmResource)(nil)
)

// NewVLLMDeployment is the spark_vllm_deployment resource.
func NewVLLMDeployment() resource.Resource { return &vllmResource{} }

type vllmResource struct {
	dep *vllmdeploy.Manager
}

const statusServing = vllmdeploy.Serving

func (r *vllmResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_vllm_deployment"
}

func (r *vllmResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	data, diags := providerdata.From(req.ProviderData)
	resp.Diagnostics.Append(diags...)
	if data != nil {
		r.dep = &vllmdeploy.Manager{Pool: data.Pool, Clusters: data.Clusters, Memo: data.Memo}
	}
}

// launch starts the server through vllmdeploy.Launch (which leaves nothing
// running when it fails) and fills in what a create or update writes.
func (r *vllmResource) launch(ctx context.Context, m *vllmModel, own float64, restart bool, sec secrets, diags *diag.Diagnostics) {
	spec, d := m.spec(ctx)
	if diags.Append(d...); diags.HasError() {
		return
	}
	spec.Restart = restart
	launched, found := r.dep.Launch(ctx, spec, vllmdeploy.Secrets{APIKey: sec.apiKey, Env: sec.env}, own)
	if addPreflight(diags, found); diags.HasError() {
		return
	}
	m.ProcessIdentity = types.StringValue(launched.Identity)
	setConcluded(launched.Concluded, m)
	m.Status = types.StringValue(statusServing)
	m.ID = types.StringValue(net.JoinHostPort(m.Head.SSHHost.ValueString(), strconv.FormatInt(m.Port.ValueInt64(), 10)))
	m.Endpoint = m.endpoint()
	m.ServedModelName = types.StringValue(m.servedName())
}

// secrets are the write-only values, read from the configuration (they are
// in no plan and no state): the API key and the secret environment.
type secrets struct {
	apiKey string
	env    map[string]string
}

// readSecrets reads api_key_wo and secret_env_wo from the configuration
// (both deployment resources have them).
func readSecrets(ctx context.Context, cfg interface {
	GetAttribute(context.Context, path.Path, any) diag.Diagnostics
}, diags *diag.Diagnostics) secrets {
	var key types.String
	var env types.Map
	diags.Append(cfg.GetAttribute(ctx, path.Root("api_key_wo"), &key)...)
	diags.Append(cfg.GetAttribute(ctx, path.Root("secret_env_wo"), &env)...)
	out := secrets{apiKey: key.ValueString(), env: map[string]string{}}
	if !env.IsNull() && !env.IsUnknown() {
		diags.Append(env.ElementsAs(ctx, &out.env, false)...)
	}
	return out
}

func (r *vllmResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m vllmModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := m.Timeouts.Create(ctx, 60*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.launch(ctx, &m, 0, false, readSecrets(ctx, req.Config, &resp.Diagnostics), &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	m.APIKeyWO, m.SecretEnvWO = types.StringNull(), types.MapNull(types.StringType)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *vllmResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	var m vllmModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	spec, diags := m.spec(ctx)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	if m.ProcessIdentity.IsNull() { // import
		run, found := r.dep.Find(ctx, spec)
		if addPreflight(&resp.Diagnostics, found); resp.Diagnostics.HasError() {
			return
		}
		adopt(&m, run)
		// What the plan would conclude about the running server's vLLM, so
		// an import reads back what a create writes. Findings are the next
		// plan's business.
		var ignored diag.Diagnostics
		if c := r.check(ctx, &m, float64(m.TP.ValueInt64()*m.PP.ValueInt64()), true, true, &ignored); c.Executor.Name != "" {
			setConcluded(c, &m)
		}
		if spec, diags = m.spec(ctx); diags.HasError() {
			resp.Diagnostics.Append(diags...)
			return
		}
	}
	status, found := r.dep.Status(ctx, spec, m.ProcessIdentity.ValueString())
	if d := preflightDiags(found); d.HasError() {
		resp.Diagnostics.Append(withGoneHint(d)...) // state kept
		return
	}
	if status == vllmdeploy.Busy {
		// A server under load answers /health late: kept, not restarted.
		status = statusServing
		resp.Diagnostics.AddWarning("vLLM answered /health late",
			fmt.Sprintf("vllm serve on %s (process %s) runs but did not answer /health within 10 s; the plan keeps it, as a busy server "+
				"answers late. If it stays so, `terraform apply -replace=<address>` restarts it.", m.ID.ValueString(), m.ProcessIdentity.ValueString()))
	}
	m.Status = types.StringValue(status)
	if m.Status.ValueString() != statusServing {
		resp.Diagnostics.AddWarning("vLLM is not serving",
			fmt.Sprintf("vllm serve on %s (process %s) is %s; the plan restarts it.", m.ID.ValueString(), m.ProcessIdentity.ValueString(), m.Status.ValueString()))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *vllmResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.Append(clearImported(ctx, resp.Private)...)
	var plan, state vllmModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, 60*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if keepsServing(&state, &plan) {
		plan.ProcessIdentity = state.ProcessIdentity
		plan.APIKeyWO, plan.SecretEnvWO = types.StringNull(), types.MapNull(types.StringType)
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	}
	old, diags := state.spec(ctx)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	if addPreflight(&resp.Diagnostics, r.dep.Stop(ctx, old, state.ProcessIdentity.ValueString())); resp.Diagnostics.HasError() {
		return
	}
	r.launch(ctx, &plan, ownGPUs(&state), true, readSecrets(ctx, req.Config, &resp.Diagnostics), &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.APIKeyWO, plan.SecretEnvWO = types.StringNull(), types.MapNull(types.StringType)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *vllmResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m vllmModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := m.Timeouts.Delete(ctx, 5*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	spec, diags := m.spec(ctx)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(withGoneHint(preflightDiags(r.dep.Stop(ctx, spec, m.ProcessIdentity.ValueString())))...)
}

// ImportState takes "<ssh_host>:<port>"; the rest is read from the server.
func (r *vllmResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	host, port, err := parseDeploymentImportID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID", err.Error())
		return
	}
	resp.Diagnostics.Append(setImported(ctx, &resp.State, importedDeployment(req.ID, host, port))...)
	resp.Diagnostics.Append(markImported(ctx, resp.Private)...)
}

// parseDeploymentImportID splits a deployment's import ID into the head's
// ssh_host and the server's port.
func parseDeploymentImportID(id string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(id)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || host == "" {
		return "", 0, fmt.Errorf("import ID %q: want <head ssh_host>:<port>, e.g. \"10.1.230.180:8000\"", id)
	}
	return host, port, nil
}

// importedDeployment is what an import knows before Read: the head and the
// port, and the defaults of what Read cannot tell from a command line that
// leaves them out. Read fills in the rest from the running server.
func importedDeployment(id, host string, port int) []imported {
	return []imported{{path.Root("id"), id}, {path.Root("port"), int64(port)}, {path.Root("head").AtName("ssh_host"), host},
		{path.Root("tensor_parallel_size"), int64(1)}, {path.Root("pipeline_parallel_size"), int64(1)}, {path.Root("host"), vllm.DefaultHost}}
}
