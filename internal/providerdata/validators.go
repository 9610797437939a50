package providerdata

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/inputs"
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

// Checked wraps a pure check from package inputs as a string validator whose
// message leads with the attribute path: `head.ssh_user: "" is empty: ...`.
func Checked(summary, desc string, check func(string) error) StringCheck {
	return StringCheck{Desc: desc, Summary: summary, Check: func(p, v string) error {
		if err := check(v); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	}}
}

// FloatMapCheck checks each element of a map of numbers, with its key.
type FloatMapCheck struct {
	Desc    string
	Summary string
	Check   func(key string, value float64) error
}

func (c FloatMapCheck) Description(context.Context) string             { return c.Desc }
func (c FloatMapCheck) MarkdownDescription(ctx context.Context) string { return c.Description(ctx) }

func (c FloatMapCheck) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k, e := range req.ConfigValue.Elements() {
		f, ok := e.(types.Float64)
		if !ok || f.IsNull() || f.IsUnknown() {
			continue
		}
		if err := c.Check(k, f.ValueFloat64()); err != nil {
			p := req.Path.AtMapKey(k)
			resp.Diagnostics.AddAttributeError(p, c.Summary, fmt.Sprintf("%s: %s", p, err))
		}
	}
}

// StringMapCheck checks each element of a map of strings, with its key.
type StringMapCheck struct {
	Desc    string
	Summary string
	Check   func(key, value string) error
}

func (c StringMapCheck) Description(context.Context) string             { return c.Desc }
func (c StringMapCheck) MarkdownDescription(ctx context.Context) string { return c.Description(ctx) }

func (c StringMapCheck) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k, e := range req.ConfigValue.Elements() {
		s, ok := e.(types.String)
		if !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		if err := c.Check(k, s.ValueString()); err != nil {
			p := req.Path.AtMapKey(k)
			resp.Diagnostics.AddAttributeError(p, c.Summary, fmt.Sprintf("%s: %s", p, err))
		}
	}
}

// The config-time checks of package inputs, as validators. Each names the
// attribute (with its map key or list index) in its message.
var (
	// Env checks an `env` map: shell variable names, values without NUL.
	Env = StringMapCheck{Desc: "environment variable names and values", Summary: "Invalid env",
		Check: func(k, v string) error {
			if err := inputs.EnvKey(k); err != nil {
				return err
			}
			return inputs.EnvValue(k, v)
		}}
	// RayResources checks custom Ray resources as ray start would.
	RayResources = FloatMapCheck{Desc: "custom Ray resources: not Ray's own names, whole quantities of at least 0", Summary: "Invalid Ray resource",
		Check: func(k string, q float64) error {
			if err := inputs.ResourceName(k); err != nil {
				return err
			}
			return inputs.ResourceQuantity(k, q)
		}}
	// RayLabels checks node labels as ray start would.
	RayLabels = StringMapCheck{Desc: "Ray node labels", Summary: "Invalid Ray label",
		Check: func(k, v string) error {
			if err := inputs.LabelKey(k); err != nil {
				return err
			}
			return inputs.LabelValue(k, v)
		}}
	WorkerName    = Checked("Invalid worker name", "a worker name", inputs.WorkerName)
	Path          = Checked("Invalid path", "a path or command name", inputs.Path)
	Address       = Checked("Invalid address", "a literal IP address, or localhost", inputs.Address)
	Image         = Checked("Invalid image", "a container image reference", inputs.Image)
	ContainerName = Checked("Invalid container name", "a docker container name", inputs.ContainerName)
	ShmSize       = Checked("Invalid shm_size", `a size such as "10g"`, inputs.ShmSize)
	GPUs          = Checked("Invalid gpus", `"all", a count, "device=...", or ""`, inputs.GPUs)
	APIKey        = Checked("Invalid API key", "a non-empty key on one line", inputs.APIKey)
	HostPort      = Checked("Invalid address", "<ip>:<port>", func(v string) error { _, err := inputs.HostPort(v); return err })
	RayStartArg   = Checked("Argument managed by the provider", "not a flag the provider sets",
		func(v string) error { return inputs.ManagedArg(inputs.RayStartFlags, "start_args", v) })
	VLLMServeArg = Checked("Argument managed by the provider", "not a flag the provider sets", inputs.VLLMArg)
	DockerRunArg = Checked("Argument managed by the provider", "not a flag the provider sets",
		func(v string) error { return inputs.ManagedArg(inputs.DockerRunFlags, "run_args", v) })
)

// NotBlank checks a string that must say something (what: "an SSH user").
func NotBlank(attr, what string) StringCheck {
	return Checked("Empty "+attr, "not empty", inputs.NotBlank(what))
}
