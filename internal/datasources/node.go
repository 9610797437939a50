// Package datasources holds the provider's data sources: framework glue that
// reads nodes through the transport and describes them.
package datasources

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

var _ datasource.DataSourceWithConfigure = (*nodeDataSource)(nil)

// NewNode is the spark_node data source.
func NewNode() datasource.DataSource { return &nodeDataSource{} }

type nodeDataSource struct {
	data *providerdata.Data
}

type nodeModel struct {
	schemaparts.NodeAccess
	RayCommand    types.String `tfsdk:"ray_command"`
	PythonCommand types.String `tfsdk:"python_command"`

	ID                 types.String     `tfsdk:"id"`
	Hostname           types.String     `tfsdk:"hostname"`
	Interfaces         []interfaceModel `tfsdk:"interfaces"`
	DefaultRouteIP     types.String     `tfsdk:"default_route_ip"`
	GPUCount           types.Int64      `tfsdk:"gpu_count"`
	PythonVersion      types.String     `tfsdk:"python_version"`
	RayVersion         types.String     `tfsdk:"ray_version"`
	VLLMVersion        types.String     `tfsdk:"vllm_version"`
	DockerVersion      types.String     `tfsdk:"docker_version"`
	HostKeyFingerprint types.String     `tfsdk:"host_key_fingerprint"`
}

type interfaceModel struct {
	Name      types.String   `tfsdk:"name"`
	Addresses []types.String `tfsdk:"addresses"`
	MTU       types.Int64    `tfsdk:"mtu"`
	Up        types.Bool     `tfsdk:"up"`
}

func (d *nodeDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node"
}

func (d *nodeDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attrs := schemaparts.NodeAccessDataSourceAttributes()
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	attrs["ray_command"] = schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Path},
		MarkdownDescription: "Path of `ray` on the node (e.g. `/opt/ray/bin/ray`). Default: `ray` on the SSH session's `PATH`."}
	attrs["python_command"] = schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Path},
		MarkdownDescription: "Python that runs Ray on the node. Default: the interpreter on `ray_command`'s `#!` line, else `python3`."}
	attrs["id"] = computed("`<ssh_host>:<ssh_port>`.")
	attrs["hostname"] = computed("The node's kernel hostname (what Ray reports as `NodeManagerHostname`).")
	attrs["default_route_ip"] = computed("Source address of the node's route to 8.8.8.8: the address a Ray head and vLLM's `get_ip()` " +
		"auto-detect. Found by a routing-table lookup; no packet is sent. Null when the node has no default route.")
	attrs["gpu_count"] = schema.Int64Attribute{Computed: true, MarkdownDescription: "GPUs listed by `nvidia-smi -L`; 0 when `nvidia-smi` is absent."}
	attrs["python_version"] = computed("Version of the Python that runs Ray; null when absent.")
	attrs["ray_version"] = computed("Installed Ray version; null when Ray is absent.")
	attrs["vllm_version"] = computed("Installed vLLM version; null when vLLM is absent.")
	attrs["docker_version"] = computed("Docker client version; null when Docker is absent.")
	attrs["host_key_fingerprint"] = computed("SHA256 fingerprint of the SSH host key the node presented (and that was verified).")
	attrs["interfaces"] = schema.ListNestedAttribute{
		Computed:            true,
		MarkdownDescription: "Network interfaces, sorted by name.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name":      schema.StringAttribute{Computed: true, MarkdownDescription: "Interface name, e.g. `enp1s0f1np1`."},
			"addresses": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Addresses in CIDR form, e.g. `192.168.200.12/24`."},
			"mtu":       schema.Int64Attribute{Computed: true, MarkdownDescription: "MTU."},
			"up":        schema.BoolAttribute{Computed: true, MarkdownDescription: "Administratively up."},
		}},
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Facts about one node, read over SSH in one round trip: interfaces and addresses, the address " +
			"Ray and vLLM would auto-detect, GPUs, and Ray/Python/vLLM/Docker versions.",
		Attributes: attrs,
	}
}

func (d *nodeDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	data, diags := providerdata.From(req.ProviderData)
	resp.Diagnostics.Append(diags...)
	d.data = data
}

func (d *nodeDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	var m nodeModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	conn, err := d.data.Pool.Get(ctx, m.Endpoint())
	if err != nil {
		resp.Diagnostics.AddAttributeError(pathSSHHost, "Cannot reach node", err.Error())
		return
	}
	res, err := conn.Run(ctx, transport.Cmd{
		Step: "read node facts",
		Argv: transport.Script(nodefacts.Script, m.RayCommand.ValueString(), m.PythonCommand.ValueString(), "", "", "", "", "", nodefacts.ReadDocker),
	})
	if err != nil {
		resp.Diagnostics.AddAttributeError(pathSSHHost, "Cannot read node facts", err.Error())
		return
	}
	f, err := nodefacts.Parse(string(res.Stdout))
	if err != nil {
		resp.Diagnostics.AddAttributeError(pathSSHHost, "Cannot read node facts", "ssh "+conn.Addr()+": "+err.Error())
		return
	}
	m.ID = types.StringValue(conn.Addr())
	m.Hostname = types.StringValue(f.Hostname)
	m.DefaultRouteIP = optString(f.DefaultRouteIP)
	m.GPUCount = types.Int64Value(int64(f.GPUCount))
	m.PythonVersion = optString(f.PythonVersion)
	m.RayVersion = optString(f.RayVersion)
	m.VLLMVersion = optString(f.VLLMVersion)
	m.DockerVersion = optString(f.DockerVersion)
	m.HostKeyFingerprint = types.StringValue(conn.HostKeyFingerprint())
	m.Interfaces = make([]interfaceModel, 0, len(f.Interfaces))
	for _, i := range f.Interfaces {
		im := interfaceModel{Name: types.StringValue(i.Name), MTU: types.Int64Value(int64(i.MTU)), Up: types.BoolValue(i.Up),
			Addresses: make([]types.String, 0, len(i.Addresses))}
		for _, a := range i.Addresses {
			im.Addresses = append(im.Addresses, types.StringValue(a.String()))
		}
		m.Interfaces = append(m.Interfaces, im)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func optString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}
