package schemaparts

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
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
	Cite    string // appended to the detail: the catalogue rule the check enforces, if any
}

func (c StringCheck) Description(context.Context) string             { return c.Desc }
func (c StringCheck) MarkdownDescription(ctx context.Context) string { return c.Description(ctx) }

func (c StringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := c.Check(req.Path.String(), req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, c.Summary, err.Error()+c.Cite)
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

// MapCheck checks each known element of a map, with its key; Value reads
// an element (false for an element that is null or unknown).
type MapCheck[T any] struct {
	Desc    string
	Summary string
	Value   func(attr.Value) (T, bool)
	Check   func(key string, value T) error
}

func (c MapCheck[T]) Description(context.Context) string             { return c.Desc }
func (c MapCheck[T]) MarkdownDescription(ctx context.Context) string { return c.Description(ctx) }

func (c MapCheck[T]) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k, e := range req.ConfigValue.Elements() {
		v, ok := c.Value(e)
		if !ok {
			continue
		}
		if err := c.Check(k, v); err != nil {
			p := req.Path.AtMapKey(k)
			resp.Diagnostics.AddAttributeError(p, c.Summary, fmt.Sprintf("%s: %s", p, err))
		}
	}
}

func knownString(e attr.Value) (string, bool) {
	s, ok := e.(types.String)
	return s.ValueString(), ok && !s.IsNull() && !s.IsUnknown()
}

func knownFloat(e attr.Value) (float64, bool) {
	f, ok := e.(types.Float64)
	return f.ValueFloat64(), ok && !f.IsNull() && !f.IsUnknown()
}

// The config-time checks of package inputs, as validators. Each names the
// attribute (with its map key or list index) in its message.
var (
	// Env checks an `env` map: shell variable names, values without NUL.
	Env = MapCheck[string]{Desc: "environment variable names and values", Summary: "Invalid env", Value: knownString,
		Check: func(k, v string) error {
			if err := inputs.EnvKey(k); err != nil {
				return err
			}
			return inputs.EnvValue(k, v)
		}}
	// PlainEnv checks a stored `env` map: Env, and no name that holds a
	// secret (those go in secret_env_wo, never in state).
	PlainEnv = MapCheck[string]{Desc: "environment variable names and values, no secrets", Summary: "Invalid env", Value: knownString,
		Check: func(k, v string) error {
			if err := inputs.PlainEnvKey(k); err != nil {
				return err
			}
			return inputs.EnvValue(k, v)
		}}
	// RayResources checks custom Ray resources as ray start would.
	RayResources = MapCheck[float64]{Desc: "custom Ray resources: not Ray's own names, whole quantities of at least 0", Summary: "Invalid Ray resource",
		Value: knownFloat,
		Check: func(k string, q float64) error {
			if err := inputs.ResourceName(k); err != nil {
				return err
			}
			return inputs.ResourceQuantity(k, q)
		}}
	// RayLabels checks node labels as ray start would.
	RayLabels = MapCheck[string]{Desc: "Ray node labels", Summary: "Invalid Ray label", Value: knownString,
		Check: func(k, v string) error {
			if err := inputs.LabelKey(k); err != nil {
				return err
			}
			return inputs.LabelValue(k, v)
		}}
	WorkerName    = Checked("Invalid worker name", "a worker name", inputs.WorkerName)
	Model         = Checked("Invalid model", "a model name or path, not a flag", inputs.Model)
	Path          = Checked("Invalid path", "a path or command name", inputs.Path)
	Address       = Checked("Invalid address", "a literal IP address, or localhost", inputs.Address)
	Image         = Checked("Invalid image", "a container image reference", inputs.Image)
	ContainerName = Checked("Invalid container name", "a docker container name", inputs.ContainerName)
	// InterfaceName checks one network interface's name.
	InterfaceName = Checked("Invalid interface", "a network interface name", inputs.InterfaceName)
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
