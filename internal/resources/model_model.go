package resources

import (
	"context"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/modelcopy"
	"github.com/lab-infra/terraform-provider-spark/internal/modelfiles"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
)

type modelModel struct {
	ID            types.String            `tfsdk:"id"`
	Source        *modelSource            `tfsdk:"source"`
	Targets       map[string]*modelTarget `tfsdk:"targets"`
	PythonCommand types.String            `tfsdk:"python_command"`
	Verify        types.String            `tfsdk:"verify"`
	KeepOnDestroy types.Bool              `tfsdk:"keep_on_destroy"`
	Files         types.Map               `tfsdk:"files"`
	TotalBytes    types.Int64             `tfsdk:"total_bytes"`
	Timeouts      timeouts.Value          `tfsdk:"timeouts"`
}

type modelSource struct {
	schemaparts.NodeAccess
	Path       types.String `tfsdk:"path"`
	Repository types.String `tfsdk:"repository"`
	Revision   types.String `tfsdk:"revision"`
	HubCache   types.String `tfsdk:"hub_cache"`
	Offline    types.Bool   `tfsdk:"offline"`
	TokenWO    types.String `tfsdk:"token_wo"`
	Commit     types.String `tfsdk:"commit"`
}

type modelTarget struct {
	schemaparts.NodeAccess
	Address types.String `tfsdk:"address"`
	Path    types.String `tfsdk:"path"`
	Missing types.List   `tfsdk:"missing"`
	Copied  types.List   `tfsdk:"copied"`
}

// fileType is one file of the manifest in state.
var fileType = types.ObjectType{AttrTypes: map[string]attr.Type{"size": types.Int64Type, "sha256": types.StringType}}

// sourceNode and targetNodes are the model's nodes as modelcopy has them.
func (m *modelModel) sourceNode() modelcopy.Node {
	return modelcopy.Node{Name: "source", Endpoint: m.Source.Endpoint(), Path: m.Source.Path.ValueString()}
}

func (m *modelModel) targetNodes() []modelcopy.Node {
	out := make([]modelcopy.Node, 0, len(m.Targets))
	for _, name := range slices.Sorted(maps.Keys(m.Targets)) {
		t := m.Targets[name]
		out = append(out, modelcopy.Node{Name: name, Endpoint: t.Endpoint(), Path: t.Path.ValueString(), Address: t.Address.ValueString()})
	}
	return out
}

// manifest is the state's files as modelcopy has them.
func (m *modelModel) manifest(ctx context.Context) (modelfiles.Manifest, diag.Diagnostics) {
	var files map[string]struct {
		Size   types.Int64  `tfsdk:"size"`
		SHA256 types.String `tfsdk:"sha256"`
	}
	diags := m.Files.ElementsAs(ctx, &files, false)
	out := modelfiles.Manifest{}
	for p, f := range files {
		out[p] = modelfiles.File{Size: f.Size.ValueInt64(), SHA256: f.SHA256.ValueString()}
	}
	return out, diags
}

// setManifest writes man into the model's files and total_bytes.
func (m *modelModel) setManifest(man modelfiles.Manifest) {
	elems := make(map[string]attr.Value, len(man))
	for p, f := range man {
		elems[p] = types.ObjectValueMust(fileType.AttrTypes, map[string]attr.Value{
			"size": types.Int64Value(f.Size), "sha256": types.StringValue(f.SHA256)})
	}
	m.Files = types.MapValueMust(fileType, elems)
	m.TotalBytes = types.Int64Value(man.Bytes())
}
