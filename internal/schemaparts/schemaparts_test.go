package schemaparts

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func validateString(v validator.String, p path.Path, val types.String) []string {
	resp := &validator.StringResponse{}
	v.ValidateString(context.Background(), validator.StringRequest{Path: p, ConfigValue: val}, resp)
	var out []string
	for _, d := range resp.Diagnostics {
		out = append(out, d.Summary()+": "+d.Detail())
	}
	return out
}

// A string check names the attribute, the value and the fix, ends with the
// rule it enforces, and leaves null and unknown values to a later step.
func TestStringCheck(t *testing.T) {
	p := path.Root("head").AtName("container")
	got := validateString(ContainerName, p, types.StringValue("bad name"))
	if len(got) != 1 || !strings.Contains(got[0], "head.container") || !strings.Contains(got[0], `"bad name"`) {
		t.Errorf("an invalid container name: %q", got)
	}
	for _, v := range []types.String{types.StringValue("ray-node-6379"), types.StringNull(), types.StringUnknown()} {
		if got := validateString(ContainerName, p, v); len(got) != 0 {
			t.Errorf("%v: %q, want nothing", v, got)
		}
	}
	cited := StringCheck{Summary: "S", Cite: " (rule)", Check: func(p, v string) error { return errFor(p, v) }}
	if got := validateString(cited, path.Root("x"), types.StringValue("v")); len(got) != 1 || got[0] != "S: x=v (rule)" {
		t.Errorf("cited: %q", got)
	}
}

type checkError string

func (e checkError) Error() string { return string(e) }

func errFor(p, v string) error { return checkError(p + "=" + v) }

// A map check names each bad element by its key, and skips unknown ones.
func TestMapCheck(t *testing.T) {
	m := types.MapValueMust(types.StringType, map[string]attr.Value{
		"GOOD": types.StringValue("1"), "bad-name": types.StringValue("1"), "LATER": types.StringUnknown()})
	resp := &validator.MapResponse{}
	Env.ValidateMap(context.Background(), validator.MapRequest{Path: path.Root("env"), ConfigValue: m}, resp)
	if resp.Diagnostics.ErrorsCount() != 1 || !strings.Contains(resp.Diagnostics[0].Detail(), `env["bad-name"]`) {
		t.Errorf("env: %v", resp.Diagnostics)
	}
}

// A node's endpoint leaves what the configuration does not set to the
// provider's settings (zero values).
func TestNodeAccessEndpoint(t *testing.T) {
	e := NodeAccess{SSHHost: types.StringValue("spark1"), SSHPort: types.Int64Null(), SSHUser: types.StringNull(), HostKey: types.StringNull()}.Endpoint()
	if e.Host != "spark1" || e.Port != 0 || e.User != "" || e.HostKey != "" {
		t.Errorf("endpoint %+v", e)
	}
	e = NodeAccess{SSHHost: types.StringValue("spark1"), SSHPort: types.Int64Value(2222), SSHUser: types.StringValue("ops")}.Endpoint()
	if e.Port != 2222 || e.User != "ops" {
		t.Errorf("endpoint %+v", e)
	}
}
