package resources

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// importedModel is the state an import writes, read into model as Read
// gets it: setImported on the framework's null state of r's schema.
func importedModel(t *testing.T, r resource.Resource, known []imported, model any) {
	t.Helper()
	ctx := context.Background()
	var sr resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sr)
	typ := sr.Schema.Type().TerraformType(ctx)
	st := tfsdk.State{Schema: sr.Schema, Raw: tftypes.NewValue(typ, nil)}
	if d := setImported(ctx, &st, known); d.HasError() {
		t.Fatalf("setImported: %v", d)
	}
	if d := st.Get(ctx, model); d.HasError() {
		t.Fatalf("state.Get: %v", d)
	}
}
