package resources

import (
	"context"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func unknownAny(vs ...attr.Value) bool {
	for _, v := range vs {
		if v.IsUnknown() {
			return true
		}
	}
	return false
}

func stringList(s []string) types.List {
	elems := make([]attr.Value, 0, len(s))
	for _, v := range slices.Sorted(slices.Values(s)) {
		elems = append(elems, types.StringValue(v))
	}
	return types.ListValueMust(types.StringType, elems)
}

func listOf(ctx context.Context, l types.List) []string {
	var out []string
	if !l.IsNull() && !l.IsUnknown() {
		_ = l.ElementsAs(ctx, &out, false)
	}
	return out
}

func or(v types.String, def string) string {
	if v.IsNull() || v.IsUnknown() {
		return def
	}
	return v.ValueString()
}
