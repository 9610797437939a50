package resources

import (
	"context"
	"net"
	"reflect"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/mpdeploy"
	"github.com/lab-infra/terraform-provider-spark/internal/mpplan"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
	"github.com/lab-infra/terraform-provider-spark/internal/supervise"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
)

type mpModel struct {
	ID              types.String            `tfsdk:"id"`
	Nodes           map[string]*mpNodeModel `tfsdk:"nodes"`
	Model           types.String            `tfsdk:"model"`
	ServedModelName types.String            `tfsdk:"served_model_name"`
	TP              types.Int64             `tfsdk:"tensor_parallel_size"`
	PP              types.Int64             `tfsdk:"pipeline_parallel_size"`
	DP              types.Int64             `tfsdk:"data_parallel_size"`
	MasterAddr      types.String            `tfsdk:"master_addr"`
	MasterPort      types.Int64             `tfsdk:"master_port"`
	Port            types.Int64             `tfsdk:"port"`
	APIKeyWO        types.String            `tfsdk:"api_key_wo"`
	APIKeyWOVersion types.Int64             `tfsdk:"api_key_wo_version"`
	APIKeyFile      types.String            `tfsdk:"api_key_file"`
	SecretEnvWO     types.Map               `tfsdk:"secret_env_wo"`
	SecretEnvWOVer  types.Int64             `tfsdk:"secret_env_wo_version"`
	Env             types.Map               `tfsdk:"env"`
	ExtraArgs       types.List              `tfsdk:"extra_args"`
	VLLMCommand     types.String            `tfsdk:"vllm_command"`
	Restart         types.String            `tfsdk:"restart"`
	Endpoint        types.String            `tfsdk:"endpoint"`
	VLLMVersion     types.String            `tfsdk:"vllm_version"`
	Status          types.String            `tfsdk:"status"`
	FabricProbe     *fabricProbeModel       `tfsdk:"fabric_probe"`
	FabricGbps      types.Map               `tfsdk:"fabric_gbps"`
	Timeouts        timeouts.Value          `tfsdk:"timeouts"`
}

type mpNodeModel struct {
	schemaparts.NodeAccess
	Rank            types.Int64  `tfsdk:"rank"`
	NodeIP          types.String `tfsdk:"node_ip"`
	Interface       types.String `tfsdk:"interface"`
	ProcessIdentity types.String `tfsdk:"process_identity"`
}

// spec is the deployment as internal/mpdeploy takes it. Unknown values
// read as empty: the checks that need them run again at apply.
func (m *mpModel) spec(ctx context.Context) (mpdeploy.Spec, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := mpdeploy.Spec{Spec: mpplan.Spec{Model: m.Model.ValueString(), TP: int(m.TP.ValueInt64()), PP: int(m.PP.ValueInt64()), DP: int(m.DP.ValueInt64()),
		MasterAddr: m.MasterAddr.ValueString(), MasterPort: int(m.MasterPort.ValueInt64()), Port: int(m.Port.ValueInt64()),
		Restart: supervise.No},
		Endpoints: map[string]transport.Endpoint{}, VLLMCommand: m.VLLMCommand.ValueString(), Env: map[string]string{},
		APIKeyFile: m.APIKeyFile.ValueString(), SecretsVersion: [2]int64{m.APIKeyWOVersion.ValueInt64(), m.SecretEnvWOVer.ValueInt64()}}
	if !m.ServedModelName.IsUnknown() {
		s.ServedName = m.ServedModelName.ValueString()
	}
	if v := m.Restart.ValueString(); v != "" { // null: state from before restart existed
		s.Restart = v
	}
	var nodes []mpplan.Node
	for name, n := range m.Nodes {
		nodes = append(nodes, mpplan.Node{Name: name, Rank: int(n.Rank.ValueInt64()), NodeIP: n.NodeIP.ValueString(), Interface: n.Interface.ValueString()})
		s.Endpoints[name] = n.Endpoint()
	}
	s.Nodes = mpplan.Sorted(nodes)
	if !m.Env.IsNull() && !m.Env.IsUnknown() {
		diags.Append(m.Env.ElementsAs(ctx, &s.Env, false)...)
	}
	if !m.ExtraArgs.IsNull() && !m.ExtraArgs.IsUnknown() {
		diags.Append(m.ExtraArgs.ElementsAs(ctx, &s.ExtraArgs, false)...)
	}
	return s, diags
}

// identities is each node's process identity, by node name.
func (m *mpModel) identities() map[string]string {
	ids := map[string]string{}
	for name, n := range m.Nodes {
		ids[name] = n.ProcessIdentity.ValueString()
	}
	return ids
}

// nodes is m's nodes; none when m is nil (no state).
func (m *mpModel) nodes() map[string]*mpNodeModel {
	if m == nil {
		return nil
	}
	return m.Nodes
}

// rank0 is the node of rank 0 (nil when none is, which D25 refuses).
func (m *mpModel) rank0() *mpNodeModel {
	for _, n := range m.Nodes {
		if n.Rank.ValueInt64() == 0 {
			return n
		}
	}
	return nil
}

// planComputed plans what follows from the configuration alone.
func (m *mpModel) planComputed(config *mpModel) {
	if (m.ServedModelName.IsUnknown() || config.ServedModelName.IsNull()) && !m.Model.IsUnknown() && !config.ServedModelName.IsUnknown() {
		m.ServedModelName = types.StringValue(vllm.ServedName(config.ServedModelName.ValueString(), m.Model.ValueString()))
	}
	r0 := m.rank0()
	if config.MasterAddr.IsNull() {
		m.MasterAddr = types.StringUnknown()
		if r0 != nil && !r0.NodeIP.IsUnknown() {
			m.MasterAddr = r0.NodeIP
		}
	}
	if r0 != nil && !r0.SSHHost.IsUnknown() && !m.Port.IsUnknown() {
		id := net.JoinHostPort(r0.SSHHost.ValueString(), strconv.FormatInt(m.Port.ValueInt64(), 10))
		m.ID = types.StringValue(id)
		m.Endpoint = types.StringValue("http://" + id + "/v1")
	}
	m.Status = types.StringValue(mpdeploy.Serving)
}

// mpRestarts says the apply must (re)start the set: nothing runs (no state,
// or not serving), something the ranks run with changed, or vLLM on the
// nodes did. A node's
// host_key only checks the node, and timeouts bound the provider: neither
// restarts anything. The plan and the apply decide by this one function;
// the apply then spares a set whose only drift is a unit edited or
// disabled by hand while its rank runs (mpdeploy.RepairInPlace): the
// plan's unknown process identities come out as they were.
func mpRestarts(ctx context.Context, state, plan *mpModel) bool {
	return state == nil || state.Status.ValueString() != mpdeploy.Serving || mpChanged(ctx, state, plan)
}

// mpChanged says the configuration asks for ranks other than those state
// records: other settings, nodes, or vLLM (what mpRestarts weighs besides
// the set's status).
func mpChanged(ctx context.Context, state, plan *mpModel) bool {
	old, d1 := state.spec(ctx)
	next, d2 := plan.spec(ctx)
	if d1.HasError() || d2.HasError() || len(old.Endpoints) != len(next.Endpoints) {
		return true
	}
	for name, e := range old.Endpoints {
		n, ok := next.Endpoints[name]
		if !ok {
			return true
		}
		e.HostKey, n.HostKey = "", ""
		if e != n {
			return true
		}
	}
	// Another vLLM installed on the nodes since the set started: the apply
	// starts it. Unknown values read as empty: a value not known yet is a
	// change.
	if !plan.VLLMVersion.IsUnknown() && !state.VLLMVersion.IsNull() && plan.VLLMVersion.ValueString() != state.VLLMVersion.ValueString() {
		return true
	}
	if plan.Model.IsUnknown() || plan.MasterAddr.IsUnknown() || plan.ServedModelName.IsUnknown() {
		return true
	}
	old.Endpoints, next.Endpoints = nil, nil
	return !reflect.DeepEqual(old, next)
}
