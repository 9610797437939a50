package resources

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/inputs"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
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

type vllmModel struct {
	ID              types.String   `tfsdk:"id"`
	Head            *headAccess    `tfsdk:"head"`
	Runtime         *runtimeModel  `tfsdk:"runtime"`
	RayAddress      types.String   `tfsdk:"ray_address"`
	Model           types.String   `tfsdk:"model"`
	ServedModelName types.String   `tfsdk:"served_model_name"`
	TP              types.Int64    `tfsdk:"tensor_parallel_size"`
	PP              types.Int64    `tfsdk:"pipeline_parallel_size"`
	HostIP          types.String   `tfsdk:"host_ip"`
	Port            types.Int64    `tfsdk:"port"`
	Host            types.String   `tfsdk:"host"`
	APIKeyWO        types.String   `tfsdk:"api_key_wo"`
	APIKeyWOVersion types.Int64    `tfsdk:"api_key_wo_version"`
	APIKeyFile      types.String   `tfsdk:"api_key_file"`
	SecretEnvWO     types.Map      `tfsdk:"secret_env_wo"`
	SecretEnvWOVer  types.Int64    `tfsdk:"secret_env_wo_version"`
	Env             types.Map      `tfsdk:"env"`
	ExtraArgs       types.List     `tfsdk:"extra_args"`
	VLLMCommand     types.String   `tfsdk:"vllm_command"`
	Endpoint        types.String   `tfsdk:"endpoint"`
	PlacementIP     types.String   `tfsdk:"placement_ip"`
	VLLMVersion     types.String   `tfsdk:"vllm_version"`
	Executor        types.String   `tfsdk:"executor"`
	PlacementPinned types.Bool     `tfsdk:"placement_pinned"`
	ProcessIdentity types.String   `tfsdk:"process_identity"`
	Status          types.String   `tfsdk:"status"`
	Timeouts        timeouts.Value `tfsdk:"timeouts"`
}

type headAccess struct {
	providerdata.NodeAccess
}

const statusServing = vllmdeploy.Serving

func (r *vllmResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_vllm_deployment"
}

// hostIPValidator is the config-time host_ip check (rule D2).
var hostIPValidator = providerdata.StringCheck{Desc: "a literal IP address", Summary: "Invalid host_ip",
	Check: func(_, v string) error { return inputs.HostIP(v) }, Cite: preflight.D2.Cite()}

func (r *vllmResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	headAttrs := providerdata.NodeAccessResourceAttributes("The Ray head's SSH address: `vllm serve` runs there.",
		" Changing it moves the deployment.", true)
	restart := "Changing it restarts the server in place, behind the same readiness gate."
	resp.Schema = schema.Schema{
		MarkdownDescription: "`vllm serve` on the head of a Ray cluster. The plan checks, from Ray's live node table, that the " +
			"address vLLM pins its placement group to (`host_ip`, else vLLM's own detection on the head) is the address Ray " +
			"registered for the head, and that tensor x pipeline parallel size fits the GPUs Ray registered. Create waits until " +
			"`/health`, `/v1/models` and a 1-token completion all answer.",
		Attributes: map[string]schema.Attribute{
			"id":          schema.StringAttribute{Computed: true, MarkdownDescription: "`<ssh_host>:<port>`.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"head":        schema.SingleNestedAttribute{Required: true, Attributes: headAttrs, MarkdownDescription: "The Ray head, where `vllm serve` runs."},
			"runtime":     runtimeAttribute(),
			"ray_address": schema.StringAttribute{Required: true, Validators: []validator.String{providerdata.HostPort}, MarkdownDescription: "`<head registered ip>:<gcs port>`, usually `spark_ray_cluster.<name>.head_address`. Set as `RAY_ADDRESS` so vLLM joins that cluster and never starts its own."},
			"model":       schema.StringAttribute{Required: true, Validators: []validator.String{providerdata.Model}, MarkdownDescription: "Model to serve (a Hugging Face name or a path on the head). " + restart},
			"served_model_name": schema.StringAttribute{Optional: true, Computed: true,
				Validators:          []validator.String{providerdata.NotBlank("served_model_name", "the name clients use")},
				MarkdownDescription: "Name clients use (`--served-model-name`). Default: `model`. " + restart},
			"tensor_parallel_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				Validators: []validator.Int64{int64validator.AtLeast(1)}, MarkdownDescription: "`--tensor-parallel-size`. " + restart},
			"pipeline_parallel_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				Validators: []validator.Int64{int64validator.AtLeast(1)}, MarkdownDescription: "`--pipeline-parallel-size`. " + restart},
			"host_ip": schema.StringAttribute{Optional: true, Validators: []validator.String{hostIPValidator},
				MarkdownDescription: "`VLLM_HOST_IP`. Must be the IP Ray registered for the head (checked at plan). Null: vLLM's own " +
					"detection on the head (the route to 8.8.8.8), shown as `placement_ip`. " + restart},
			"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(8000),
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
				Validators:    []validator.Int64{int64validator.Between(1, 65535)}, MarkdownDescription: "HTTP port. Default 8000. Not the head's GCS port."},
			"host": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(vllm.DefaultHost),
				Validators: []validator.String{providerdata.Address},
				MarkdownDescription: "`--host`: the address vLLM listens on. Default `0.0.0.0`, every address of the head, with a plan " +
					"warning when no API key is set; `127.0.0.1` keeps it to the head itself. " + restart},
			"api_key_wo": schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
				Validators: []validator.String{stringvalidator.ConflictsWith(path.MatchRoot("api_key_file")), providerdata.APIKey},
				MarkdownDescription: "API key clients must send (`VLLM_API_KEY`). Write-only (Terraform/OpenTofu 1.11+): never stored in " +
					"state or plan, never in the process's argv. Bump `api_key_wo_version` to rotate."},
			"api_key_wo_version": schema.Int64Attribute{Optional: true, MarkdownDescription: "Change to restart with a new `api_key_wo`."},
			"api_key_file": schema.StringAttribute{Optional: true, Validators: []validator.String{providerdata.Path},
				MarkdownDescription: "Alternative to `api_key_wo` for older CLIs: a file on the head holding the key, read there at launch."},
			"secret_env_wo": schema.MapAttribute{Optional: true, Sensitive: true, WriteOnly: true, ElementType: types.StringType,
				Validators: []validator.Map{providerdata.Env},
				MarkdownDescription: "Secret environment for `vllm serve` (e.g. `HF_TOKEN`), added to `env`. Write-only (Terraform/OpenTofu " +
					"1.11+): written only to the server's 0600 environment file on the head, never to state, plan, argv or logs. " +
					"Bump `secret_env_wo_version` to restart with new values."},
			"secret_env_wo_version": schema.Int64Attribute{Optional: true, MarkdownDescription: "Change to restart with a new `secret_env_wo`."},
			"env": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{providerdata.PlainEnv},
				MarkdownDescription: "Environment for `vllm serve` (e.g. `NCCL_SOCKET_IFNAME`); interface names are checked on the head. " +
					"Stored in state: names that hold secrets (`HF_TOKEN`, `*_API_KEY`, `*_SECRET`, `*_PASSWORD`, ...) are refused here; " +
					"give them in `secret_env_wo`, `VLLM_API_KEY` in `api_key_wo`. " + restart},
			"extra_args": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				Validators: []validator.List{listvalidator.ValueStringsAre(providerdata.VLLMServeArg)},
				MarkdownDescription: "Extra `vllm serve` arguments, each passed as one quoted argument. Flags the provider sets " +
					"(`--model`, `--served-model-name`, `--tensor-parallel-size`/`-tp`, `--pipeline-parallel-size`/`-pp`, " +
					"`--distributed-executor-backend`, `--host`, `--port`, `--uds`, `--api-key`, `--config`) are refused in every " +
					"spelling vLLM reads (underscores, unambiguous prefixes). " + restart},
			"vllm_command": schema.StringAttribute{Optional: true, Validators: []validator.String{providerdata.Path}, MarkdownDescription: "Path of `vllm` on the head. Default: `vllm`."},
			"endpoint":     schema.StringAttribute{Computed: true, MarkdownDescription: "OpenAI base URL: `http://<ssh_host>:<port>/v1`, or on `host` when vLLM listens on one address only."},
			"placement_ip": schema.StringAttribute{Computed: true, MarkdownDescription: "The head's address as vLLM places by it: " +
				"where `placement_pinned`, the address bundle 0 of its placement group is pinned to (`node:<ip>`: `VLLM_HOST_IP`, else vLLM's " +
				"detection); otherwise the address Ray registered for the head, which RayExecutorV2 uses."},
			"vllm_version": schema.StringAttribute{Computed: true, MarkdownDescription: "The vLLM version on the head, read where " +
				"`vllm serve` runs (the runtime's container or the host). The placement rule follows it."},
			"executor": schema.StringAttribute{Computed: true, MarkdownDescription: "The Ray executor this vLLM will run: " +
				"`RayDistributedExecutor` (the legacy one) or `RayExecutorV2`, from the version and `VLLM_USE_RAY_V2_EXECUTOR_BACKEND` " +
				"(in `env`, else in the head's environment, else the release's default)."},
			"placement_pinned": schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether this vLLM pins bundle 0 of its " +
				"placement group to `node:<VLLM_HOST_IP>`. Where it does, an address Ray did not register for the head is an error at " +
				"plan (the placement group would never be placed); where it does not, a warning."},
			"process_identity": schema.StringAttribute{Computed: true, MarkdownDescription: "`<pid>:<start time>` of the server process."},
			"status":           schema.StringAttribute{Computed: true, MarkdownDescription: "`serving` when the process runs and `/health` answers; otherwise what was found. Planned as `serving`."},
			"timeouts":         timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}

func (r *vllmResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	data, diags := providerdata.From(req.ProviderData)
	resp.Diagnostics.Append(diags...)
	if data != nil {
		r.dep = &vllmdeploy.Manager{Pool: data.Pool, Clusters: data.Clusters, Models: data.Models}
	}
}

func (m *vllmModel) servedName() string {
	if !m.ServedModelName.IsNull() && !m.ServedModelName.IsUnknown() && m.ServedModelName.ValueString() != "" {
		return m.ServedModelName.ValueString()
	}
	return m.Model.ValueString()
}

// gcsPortOf is ray_address's port: the cluster's GCS port, which names its
// container (6379, Ray's default, until ray_address is known).
func gcsPortOf(rayAddress string) int {
	_, p, err := net.SplitHostPort(rayAddress)
	if n, perr := strconv.Atoi(p); err == nil && perr == nil {
		return n
	}
	return 6379
}

// spec is the deployment as internal/vllmdeploy takes it. Unknown values
// read as empty: the checks that need them run again at apply.
func (m *vllmModel) spec(ctx context.Context) (vllmdeploy.Spec, diag.Diagnostics) {
	cm := clusterModel{Runtime: m.Runtime}
	rt, diags := cm.runtime(ctx, gcsPortOf(m.RayAddress.ValueString()))
	s := vllmdeploy.Spec{Head: m.Head.Endpoint(), Runtime: rt, RayAddress: m.RayAddress.ValueString(), Model: m.Model.ValueString(),
		TP: int(m.TP.ValueInt64()), PP: int(m.PP.ValueInt64()), HostIP: m.HostIP.ValueString(), Port: int(m.Port.ValueInt64()),
		Host: m.Host.ValueString(), APIKeyFile: m.APIKeyFile.ValueString(), VLLMCommand: m.VLLMCommand.ValueString(), Env: m.env(ctx, &diags)}
	if !m.ServedModelName.IsUnknown() {
		s.ServedName = m.ServedModelName.ValueString()
	}
	if !m.ExtraArgs.IsNull() && !m.ExtraArgs.IsUnknown() {
		diags.Append(m.ExtraArgs.ElementsAs(ctx, &s.ExtraArgs, false)...)
	}
	return s, diags
}

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

func (m *vllmModel) env(ctx context.Context, diags *diag.Diagnostics) map[string]string {
	env := map[string]string{}
	if !m.Env.IsNull() && !m.Env.IsUnknown() {
		diags.Append(m.Env.ElementsAs(ctx, &env, false)...)
	}
	return env
}

// ownGPUs: what a serving deployment's placement group holds; a restart
// frees them before the new server asks.
func ownGPUs(state *vllmModel) float64 {
	// A process that runs holds them (and its port), serving or not: an
	// unhealthy server is restarted by the plan, not refused for them.
	if state == nil || state.Status.IsNull() || state.Status.IsUnknown() || state.Status.ValueString() == vllmdeploy.Stopped {
		return 0
	}
	return float64(state.TP.ValueInt64() * state.PP.ValueInt64())
}

// setConcluded writes what the placement checks concluded into m.
func setConcluded(p preflight.Concluded, m *vllmModel) {
	m.PlacementIP = types.StringValue(p.PlacementIP)
	m.VLLMVersion = types.StringValue(p.Executor.Version)
	m.Executor = types.StringValue(p.Executor.Name)
	m.PlacementPinned = types.BoolValue(p.Executor.Pinned)
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
// serving the old name).
func planComputed(plan, config *vllmModel) {
	if (plan.ServedModelName.IsUnknown() || config.ServedModelName.IsNull()) && !plan.Model.IsUnknown() {
		plan.ServedModelName = types.StringValue(plan.Model.ValueString())
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
		diags.Append(keptRunning(found)...)
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

// hostOf is the address vLLM listens on; state written before `host`
// existed holds null, which meant the default.
func hostOf(m *vllmModel) string {
	if m.Host.IsNull() {
		return vllm.DefaultHost
	}
	return m.Host.ValueString()
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

func unknownAny(vs ...attr.Value) bool {
	for _, v := range vs {
		if v.IsUnknown() {
			return true
		}
	}
	return false
}

// keepRunning are the attributes whose change leaves the server as it runs:
// where it runs and on which port (a change there replaces the deployment,
// by their plan modifiers), the write-only values (their _version
// attributes restart it), what the provider fills in, and Terraform's own
// timeouts. Every other attribute is something the server was started
// with: a new attribute restarts it unless it is named here (a new nested
// object must be named here: only attribute values compare).
var keepRunning = map[string]bool{"id": true, "head": true, "runtime": true, "port": true, "api_key_wo": true,
	"secret_env_wo": true, "endpoint": true, "placement_ip": true, "vllm_version": true, "executor": true,
	"placement_pinned": true, "process_identity": true, "status": true, "timeouts": true}

// needsRestart: anything the server was started with changed. host
// compares as served: null (an import's state) is vLLM's default.
func needsRestart(old, n *vllmModel) bool {
	if hostOf(old) != hostOf(n) {
		return true
	}
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(n).Elem()
	for i := range ov.NumField() {
		name := ov.Type().Field(i).Tag.Get("tfsdk")
		if keepRunning[name] || name == "host" {
			continue
		}
		a, aok := ov.Field(i).Interface().(attr.Value)
		b, bok := nv.Field(i).Interface().(attr.Value)
		if !aok || !bok || !a.Equal(b) {
			return true // not an attribute value: a nested object named nowhere, taken as changed
		}
	}
	return false
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

func (r *vllmResource) secrets(ctx context.Context, cfg interface {
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
	r.launch(ctx, &m, 0, false, r.secrets(ctx, req.Config, &resp.Diagnostics), &resp.Diagnostics)
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

// adopt fills an imported model from the running server.
func adopt(m *vllmModel, run *vllm.Running) {
	o := run.Options
	m.ProcessIdentity = types.StringValue(run.Identity)
	m.Model = types.StringValue(o.Model)
	served := o.ServedName
	if served == "" {
		served = o.Model
	}
	m.ServedModelName = types.StringValue(served)
	m.TP = types.Int64Value(int64(o.TP))
	m.PP = types.Int64Value(int64(o.PP))
	m.Host = types.StringValue(o.Host)
	if run.HostIP != "" {
		m.HostIP = types.StringValue(run.HostIP)
		m.PlacementIP = types.StringValue(run.HostIP)
	}
	if run.RayAddress != "" {
		m.RayAddress = types.StringValue(run.RayAddress)
	}
	if run.ExecutorFlag != "" {
		// The executor it runs depends on it; the rest of its env is not ours to read.
		m.Env, _ = types.MapValueFrom(context.Background(), types.StringType, map[string]string{"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": run.ExecutorFlag})
	}
	if o.Command != "vllm" {
		m.VLLMCommand = types.StringValue(o.Command)
	}
	if len(o.ExtraArgs) > 0 {
		l, _ := types.ListValueFrom(context.Background(), types.StringType, o.ExtraArgs)
		m.ExtraArgs = l
	}
	m.Endpoint = m.endpoint()
}

// endpoint is the OpenAI base URL: on the head's SSH address when vLLM
// listens on every address, else on the one address it listens on.
func (m *vllmModel) endpoint() types.String {
	if m.Host.IsUnknown() {
		return types.StringUnknown()
	}
	host := m.Head.SSHHost.ValueString()
	if a, err := netip.ParseAddr(m.Host.ValueString()); err == nil && !a.IsUnspecified() {
		host = a.String()
	} else if m.Host.ValueString() == "localhost" {
		host = "localhost"
	}
	return types.StringValue("http://" + net.JoinHostPort(host, strconv.FormatInt(m.Port.ValueInt64(), 10)) + "/v1")
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
	r.launch(ctx, &plan, ownGPUs(&state), true, r.secrets(ctx, req.Config, &resp.Diagnostics), &resp.Diagnostics)
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
