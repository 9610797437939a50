package resources

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
)

// importedKey marks, in the resource's private state, a resource imported
// and not yet applied: settings Ray cannot report back (env, start_args,
// runtime) are null in its state, and the first plan adopts what the
// configuration says instead of replacing what runs. Any apply clears it.
// Without the mark, null in state means "never set", and setting it is a
// change that must take effect (the cluster is replaced).
const importedKey = "imported"

// privateState is the part of the framework's private state API used here
// (requests carry *privatestate.ProviderData, responses too).
type privateState interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

type privateSetter interface {
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

func markImported(ctx context.Context, p privateSetter) diag.Diagnostics {
	return p.SetKey(ctx, importedKey, []byte(`true`))
}

// clearImported drops the mark: setting a key to nothing removes it.
func clearImported(ctx context.Context, p privateSetter) diag.Diagnostics {
	return p.SetKey(ctx, importedKey, nil)
}

func justImported(ctx context.Context, p privateState) bool {
	if p == nil {
		return false
	}
	v, _ := p.GetKey(ctx, importedKey)
	return string(v) == "true"
}

// replaceUnlessImported: a change replaces what runs, except null in the
// state of a resource imported and not yet applied.
func replaceUnlessImported(ctx context.Context, stateNull bool, private privateState) bool {
	return !stateNull || !justImported(ctx, private)
}

func replaceObjectUnlessImported(ctx context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = replaceUnlessImported(ctx, req.StateValue.IsNull(), req.Private)
}

func replaceStringUnlessImported(ctx context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = replaceUnlessImported(ctx, req.StateValue.IsNull(), req.Private)
}

func replaceMapUnlessImported(ctx context.Context, req planmodifier.MapRequest, resp *mapplanmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = replaceUnlessImported(ctx, req.StateValue.IsNull(), req.Private)
}

func replaceListUnlessImported(ctx context.Context, req planmodifier.ListRequest, resp *listplanmodifier.RequiresReplaceIfFuncResponse) {
	resp.RequiresReplace = replaceUnlessImported(ctx, req.StateValue.IsNull(), req.Private)
}

// imported is one value an import knows before Read.
type imported struct {
	at    path.Path
	value any
}

// setImported writes what an import knows into its state, which the
// framework starts as null: every attribute not named stays null, so the
// list names only what is known, never the schema's other attributes.
func setImported(ctx context.Context, st *tfsdk.State, known []imported) diag.Diagnostics {
	var diags diag.Diagnostics
	for _, k := range known {
		diags.Append(st.SetAttribute(ctx, k.at, k.value)...)
	}
	return diags
}
