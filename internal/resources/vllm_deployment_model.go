package resources

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
	"github.com/lab-infra/terraform-provider-spark/internal/vllmdeploy"
)

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
	schemaparts.NodeAccess
}

// servedName is the name clients ask for (vllm.ServedName: the model's
// unless served_model_name is set).
func (m *vllmModel) servedName() string {
	return vllm.ServedName(m.ServedModelName.ValueString(), m.Model.ValueString())
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
	rt, diags := m.Runtime.runtime(ctx, gcsPortOf(m.RayAddress.ValueString()))
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

// hostOf is the address vLLM listens on; state written before `host`
// existed holds null, which meant the default.
func hostOf(m *vllmModel) string {
	if m.Host.IsNull() {
		return vllm.DefaultHost
	}
	return m.Host.ValueString()
}

// leaveServerRunning are the attributes whose change leaves the server as it runs:
// where it runs and on which port (a change there replaces the deployment,
// by their plan modifiers), the write-only values (their _version
// attributes restart it), what the provider fills in, and Terraform's own
// timeouts. Every other attribute is something the server was started
// with: a new attribute restarts it unless it is named here (a new nested
// object must be named here: only attribute values compare).
var leaveServerRunning = map[string]bool{"id": true, "head": true, "runtime": true, "port": true, "api_key_wo": true,
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
		if leaveServerRunning[name] || name == "host" {
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

// adopt fills an imported model from the running server.
func adopt(m *vllmModel, run *vllm.Running) {
	o := run.Options
	m.ProcessIdentity = types.StringValue(run.Identity)
	m.Model = types.StringValue(o.Model)
	m.ServedModelName = types.StringValue(vllm.ServedName(o.ServedName, o.Model))
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
