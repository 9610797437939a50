package providerdata

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// HostKey checks at config time that a value is an SSH public key line.
type HostKey struct{}

func (HostKey) Description(context.Context) string {
	return "an authorized_keys-style public key line"
}
func (v HostKey) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (HostKey) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := transport.ParseHostKey(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid host key",
			fmt.Sprintf("%s = %q is %v", req.Path, req.ConfigValue.ValueString(), err))
	}
}

// Duration checks at config time that a value parses as a Go duration.
type Duration struct{}

func (Duration) Description(context.Context) string               { return `a duration such as "30s" or "2m"` }
func (v Duration) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (Duration) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if d, err := time.ParseDuration(req.ConfigValue.ValueString()); err != nil || d <= 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration",
			fmt.Sprintf("%s = %q is not a positive duration: write it like \"30s\", \"2m\" or \"1h\".", req.Path, req.ConfigValue.ValueString()))
	}
}
