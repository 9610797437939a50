package providerdata

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// StringCheck is a config-time check of a known string value: Check gets
// the attribute path (for the message) and the value, and returns the
// diagnostic's detail as an error. Null and unknown values are not checked.
type StringCheck struct {
	Desc    string
	Summary string
	Check   func(path, value string) error
}

func (c StringCheck) Description(context.Context) string             { return c.Desc }
func (c StringCheck) MarkdownDescription(ctx context.Context) string { return c.Description(ctx) }

func (c StringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := c.Check(req.Path.String(), req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, c.Summary, err.Error())
	}
}

// HostKey checks that a value is an SSH public key line.
var HostKey = StringCheck{Desc: "an authorized_keys-style public key line", Summary: "Invalid host key",
	Check: func(p, v string) error {
		if _, err := transport.ParseHostKey(v); err != nil {
			return fmt.Errorf("%s = %q is %w", p, v, err)
		}
		return nil
	}}

// Duration checks that a value parses as a positive Go duration.
var Duration = StringCheck{Desc: `a duration such as "30s" or "2m"`, Summary: "Invalid duration",
	Check: func(p, v string) error {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return fmt.Errorf("%s = %q is not a positive duration: write it like \"30s\", \"2m\" or \"1h\"", p, v)
		}
		return nil
	}}
