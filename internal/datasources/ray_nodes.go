package datasources

import (
	"context"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
)

var _ datasource.DataSourceWithConfigure = (*rayNodesDataSource)(nil)

// NewRayNodes is the spark_ray_nodes data source: Ray's registered node
// table, read through the head — the diagnosis the field report needed.
func NewRayNodes() datasource.DataSource { return &rayNodesDataSource{} }

type rayNodesDataSource struct {
	mgr *raycluster.Manager
}

type rayNodesModel struct {
	schemaparts.NodeAccess
	RayCommand types.String   `tfsdk:"ray_command"`
	Container  types.String   `tfsdk:"container"`
	RayAddress types.String   `tfsdk:"ray_address"`
	ID         types.String   `tfsdk:"id"`
	RayVersion types.String   `tfsdk:"ray_version"`
	Nodes      []rayNodeEntry `tfsdk:"nodes"`
}

type rayNodeEntry struct {
	NodeID       types.String `tfsdk:"node_id"`
	Alive        types.Bool   `tfsdk:"alive"`
	RegisteredIP types.String `tfsdk:"registered_ip"`
	Hostname     types.String `tfsdk:"hostname"`
	IsHead       types.Bool   `tfsdk:"is_head"`
	Resources    types.Map    `tfsdk:"resources"`
	Labels       types.Map    `tfsdk:"labels"`
}

func (d *rayNodesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_ray_nodes"
}

func (d *rayNodesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attrs := schemaparts.NodeAccessDataSourceAttributes()
	attrs["ssh_host"] = schema.StringAttribute{Required: true, MarkdownDescription: "SSH address of the Ray head (or any node that can reach the GCS)."}
	attrs["ray_command"] = schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Path}, MarkdownDescription: "Path of `ray` on the node. Default: `ray`."}
	attrs["container"] = schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.ContainerName}, MarkdownDescription: "Name of the container Ray runs in, when it runs in one (commands go through `docker exec`)."}
	attrs["ray_address"] = schema.StringAttribute{Optional: true, Computed: true, Validators: []validator.String{schemaparts.HostPort},
		MarkdownDescription: "GCS address (`ip:port`). Default: what Ray recorded on the node (`/tmp/ray/ray_current_cluster`)."}
	attrs["id"] = schema.StringAttribute{Computed: true, MarkdownDescription: "The GCS address read."}
	attrs["ray_version"] = schema.StringAttribute{Computed: true, MarkdownDescription: "Ray version of the cluster."}
	attrs["nodes"] = schema.ListNestedAttribute{Computed: true, MarkdownDescription: "Every node Ray registered, dead ones included, head first.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"node_id":       schema.StringAttribute{Computed: true, MarkdownDescription: "Ray node ID."},
			"alive":         schema.BoolAttribute{Computed: true, MarkdownDescription: "Alive in the GCS."},
			"registered_ip": schema.StringAttribute{Computed: true, MarkdownDescription: "`NodeManagerAddress`: the IP in the node's `node:<ip>` label, the one vLLM's `VLLM_HOST_IP` must equal."},
			"hostname":      schema.StringAttribute{Computed: true, MarkdownDescription: "`NodeManagerHostname`."},
			"is_head":       schema.BoolAttribute{Computed: true, MarkdownDescription: "The head node."},
			"resources":     schema.MapAttribute{Computed: true, ElementType: types.Float64Type, MarkdownDescription: "Total resources, e.g. `GPU`, `node:<ip>`."},
			"labels":        schema.MapAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Node labels."},
		}}}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Ray's registered node table, read through a node over SSH with the minimal `ray` package: which " +
			"IP each node registered (`node:<ip>`), which is the head, and its GPUs.",
		Attributes: attrs,
	}
}

func (d *rayNodesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	data, diags := providerdata.From(req.ProviderData)
	resp.Diagnostics.Append(diags...)
	if data != nil {
		d.mgr = data.Clusters
	}
}

func (d *rayNodesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	var m rayNodesModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	spec := raycluster.Spec{Runtime: nodeexec.Runtime{RayCommand: m.RayCommand.ValueString()},
		Head: raycluster.NodeSpec{Name: raycluster.HeadName, Endpoint: m.Endpoint()}}
	if c := m.Container.ValueString(); c != "" {
		spec.Runtime.Container = &nodeexec.Container{Name: c}
	}
	addr := m.RayAddress.ValueString()
	if addr == "" {
		a, err := d.mgr.CurrentCluster(ctx, spec)
		if err != nil {
			resp.Diagnostics.AddAttributeError(pathSSHHost, "Cannot find the Ray cluster", err.Error())
			return
		}
		addr = a
	}
	t, err := d.mgr.Snapshot(ctx, spec, addr)
	if err != nil {
		resp.Diagnostics.AddAttributeError(pathSSHHost, "Cannot read Ray's node table", err.Error())
		return
	}
	if !t.GCSUp {
		resp.Diagnostics.AddAttributeError(pathSSHHost, "Ray cluster not running",
			"The GCS at "+addr+" does not answer ("+t.GCSError+"). Start the cluster, or check ray_address.")
		return
	}
	m.RayAddress, m.ID, m.RayVersion = types.StringValue(addr), types.StringValue(addr), types.StringValue(t.RayVersion)
	sort.SliceStable(t.Nodes, func(i, j int) bool {
		if t.Nodes[i].IsHead != t.Nodes[j].IsHead {
			return t.Nodes[i].IsHead
		}
		if t.Nodes[i].Alive != t.Nodes[j].Alive {
			return t.Nodes[i].Alive
		}
		return t.Nodes[i].IP < t.Nodes[j].IP
	})
	m.Nodes = make([]rayNodeEntry, 0, len(t.Nodes))
	for _, n := range t.Nodes {
		res, diags := types.MapValueFrom(ctx, types.Float64Type, n.Resources)
		resp.Diagnostics.Append(diags...)
		labels, diags := types.MapValueFrom(ctx, types.StringType, n.Labels)
		resp.Diagnostics.Append(diags...)
		m.Nodes = append(m.Nodes, rayNodeEntry{NodeID: types.StringValue(n.ID), Alive: types.BoolValue(n.Alive),
			RegisteredIP: types.StringValue(n.IP), Hostname: types.StringValue(n.Hostname), IsHead: types.BoolValue(n.IsHead),
			Resources: res, Labels: labels})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
