package resources

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
)

type clusterModel struct {
	ID            types.String             `tfsdk:"id"`
	Head          *rayNodeModel            `tfsdk:"head"`
	Workers       map[string]*rayNodeModel `tfsdk:"workers"`
	Runtime       *runtimeModel            `tfsdk:"runtime"`
	GCSPort       types.Int64              `tfsdk:"gcs_port"`
	Env           types.Map                `tfsdk:"env"`
	SecretEnvWO   types.Map                `tfsdk:"secret_env_wo"`
	SecretEnvVer  types.Int64              `tfsdk:"secret_env_wo_version"`
	StartArgs     types.List               `tfsdk:"start_args"`
	DashboardHost types.String             `tfsdk:"dashboard_host"`
	AuthMode      types.String             `tfsdk:"auth_mode"`
	FabricProbe   *fabricProbeModel        `tfsdk:"fabric_probe"`
	FabricGbps    types.Map                `tfsdk:"fabric_gbps"`
	HeadAddress   types.String             `tfsdk:"head_address"`
	RayVersion    types.String             `tfsdk:"ray_version"`
	Timeouts      timeouts.Value           `tfsdk:"timeouts"`
}

type rayNodeModel struct {
	schemaparts.NodeAccess
	NodeIP       types.String `tfsdk:"node_ip"`
	NumGPUs      types.Int64  `tfsdk:"num_gpus"`
	Resources    types.Map    `tfsdk:"resources"`
	Labels       types.Map    `tfsdk:"labels"`
	Interface    types.String `tfsdk:"interface"`
	RegisteredIP types.String `tfsdk:"registered_ip"`
	NodeID       types.String `tfsdk:"node_id"`
	Alive        types.Bool   `tfsdk:"alive"`
}

// hasUnknown reports whether something the nodes are reached or started
// with is not known yet: the checks then run at apply instead.
func (m *clusterModel) hasUnknown() bool {
	if m.Head == nil || m.GCSPort.IsUnknown() || m.Env.IsUnknown() || m.StartArgs.IsUnknown() {
		return true
	}
	nodes := []*rayNodeModel{m.Head}
	for _, w := range m.Workers {
		nodes = append(nodes, w)
	}
	for _, n := range nodes {
		if n == nil || n.SSHHost.IsUnknown() || n.SSHPort.IsUnknown() || n.SSHUser.IsUnknown() || n.HostKey.IsUnknown() ||
			n.NodeIP.IsUnknown() || n.Resources.IsUnknown() || n.Labels.IsUnknown() || n.Interface.IsUnknown() {
			return true
		}
	}
	if rt := m.Runtime; rt != nil && rt.Container != nil && (rt.Container.Image.IsUnknown() || rt.Container.RunArgs.IsUnknown()) {
		return true
	}
	return false
}

func (n *rayNodeModel) spec(ctx context.Context, name string, p finding.Path) (raycluster.NodeSpec, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := raycluster.NodeSpec{Name: name, Path: p, Endpoint: n.Endpoint(), NodeIP: n.NodeIP.ValueString(), Interface: n.Interface.ValueString()}
	if !n.NumGPUs.IsNull() && !n.NumGPUs.IsUnknown() {
		v := n.NumGPUs.ValueInt64()
		s.NumGPUs = &v
	}
	if !n.Resources.IsNull() && !n.Resources.IsUnknown() {
		diags.Append(n.Resources.ElementsAs(ctx, &s.Resources, false)...)
	}
	if !n.Labels.IsNull() && !n.Labels.IsUnknown() {
		diags.Append(n.Labels.ElementsAs(ctx, &s.Labels, false)...)
	}
	return s, diags
}

// spec turns the model into the domain's cluster description.
func (m *clusterModel) spec(ctx context.Context) (raycluster.Spec, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := raycluster.Spec{Workers: map[string]raycluster.NodeSpec{}, GCSPort: int(m.GCSPort.ValueInt64()),
		DashboardHost: m.DashboardHost.ValueString(), AuthToken: m.AuthMode.ValueString() == "token"}
	if s.GCSPort == 0 {
		s.GCSPort = 6379
	}
	var d diag.Diagnostics
	s.Runtime, d = m.Runtime.runtime(ctx, s.GCSPort)
	diags.Append(d...)
	s.Head, d = m.Head.spec(ctx, raycluster.HeadName, finding.Attr("head"))
	diags.Append(d...)
	for name, w := range m.Workers {
		s.Workers[name], d = w.spec(ctx, name, finding.Attr("workers").Key(name))
		diags.Append(d...)
	}
	if !m.Env.IsNull() {
		diags.Append(m.Env.ElementsAs(ctx, &s.Env, false)...)
	}
	if !m.StartArgs.IsNull() {
		diags.Append(m.StartArgs.ElementsAs(ctx, &s.StartArgs, false)...)
	}
	return s, diags
}

func (m *clusterModel) gcsAddr() string {
	return net.JoinHostPort(m.Head.RegisteredIP.ValueString(), strconv.FormatInt(m.GCSPort.ValueInt64(), 10))
}

// customResources drops Ray's own; what remains of a node's resources are
// the custom ones the operator gave.
func customResources(n ray.Node) map[string]float64 {
	out := map[string]float64{}
	for k, v := range n.Resources {
		switch {
		case k == "CPU" || k == "GPU" || k == "memory" || k == "object_store_memory",
			strings.HasPrefix(k, "node:"), strings.HasPrefix(k, "accelerator_type:"):
		default:
			out[k] = v
		}
	}
	return out
}

func customLabels(n ray.Node) map[string]string {
	out := map[string]string{}
	for k, v := range n.Labels {
		if !strings.HasPrefix(k, "ray.io/") {
			out[k] = v
		}
	}
	return out
}

// observe copies what Ray registered for a node into the model.
func (n *rayNodeModel) observe(r ray.Node) {
	n.RegisteredIP = types.StringValue(r.IP)
	n.NodeID = types.StringValue(r.ID)
	n.Alive = types.BoolValue(r.Alive)
	n.NumGPUs = types.Int64Value(int64(r.Resources["GPU"]))
	rv, _ := types.MapValueFrom(context.Background(), types.Float64Type, customResources(r))
	n.Resources = rv
	lv, _ := types.MapValueFrom(context.Background(), types.StringType, customLabels(r))
	n.Labels = lv
}

func nodeNotAlive(name string, n *rayNodeModel) string {
	return fmt.Sprintf("%s (%s, registered as %s)", name, n.SSHHost.ValueString(), n.RegisteredIP.ValueString())
}
