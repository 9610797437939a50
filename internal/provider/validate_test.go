package provider_test

import (
	"context"
	"math/big"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/lab-infra/terraform-provider-spark/internal/provider"
)

// These tests send configurations through the provider's own gRPC surface,
// as Terraform does at `terraform validate`: they prove each check is wired
// to its attribute (the checks themselves are tested in package inputs).
// Nothing here reaches a node.

// unknown stands for a value Terraform does not know yet at validate (a
// reference to another resource's computed attribute).
var unknown = &struct{ unknown bool }{true}

// value builds a configuration value of type t from plain Go values; what
// an object leaves out is null.
func value(t *testing.T, typ tftypes.Type, v any) tftypes.Value {
	t.Helper()
	if v == nil {
		return tftypes.NewValue(typ, nil)
	}
	if v == unknown {
		return tftypes.NewValue(typ, tftypes.UnknownValue)
	}
	switch typ := typ.(type) {
	case tftypes.Object:
		m := v.(map[string]any)
		out := map[string]tftypes.Value{}
		for k, at := range typ.AttributeTypes {
			out[k] = value(t, at, m[k])
			delete(m, k)
		}
		for k := range m {
			t.Fatalf("no attribute %q in %s", k, typ)
		}
		return tftypes.NewValue(typ, out)
	case tftypes.Map:
		out := map[string]tftypes.Value{}
		for k, e := range v.(map[string]any) {
			out[k] = value(t, typ.ElementType, e)
		}
		return tftypes.NewValue(typ, out)
	case tftypes.List:
		var out []tftypes.Value
		for _, e := range v.([]any) {
			out = append(out, value(t, typ.ElementType, e))
		}
		return tftypes.NewValue(typ, out)
	}
	switch x := v.(type) {
	case int:
		return tftypes.NewValue(typ, big.NewFloat(float64(x)))
	case float64:
		return tftypes.NewValue(typ, big.NewFloat(x))
	}
	return tftypes.NewValue(typ, v)
}

type validateCase struct {
	name   string
	kind   string // resource, data, provider
	typ    string // e.g. spark_ray_cluster
	config map[string]any
	want   string // "" for a configuration that validates; else a part of the error detail
	warn   string // when set, a part of a warning's detail that must be there
}

func (c validateCase) run(t *testing.T, srv tfprotov6.ProviderServer, schemas *tfprotov6.GetProviderSchemaResponse) {
	ctx := context.Background()
	var sch *tfprotov6.Schema
	switch c.kind {
	case "resource":
		sch = schemas.ResourceSchemas[c.typ]
	case "data":
		sch = schemas.DataSourceSchemas[c.typ]
	case "provider":
		sch = schemas.Provider
	}
	if sch == nil {
		t.Fatalf("no schema for %s %s", c.kind, c.typ)
	}
	typ := sch.ValueType()
	dv, err := tfprotov6.NewDynamicValue(typ, value(t, typ, c.config))
	if err != nil {
		t.Fatal(err)
	}
	var diags []*tfprotov6.Diagnostic
	switch c.kind {
	case "resource":
		r, err := srv.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: c.typ, Config: &dv,
			ClientCapabilities: &tfprotov6.ValidateResourceConfigClientCapabilities{WriteOnlyAttributesAllowed: true}})
		if err != nil {
			t.Fatal(err)
		}
		diags = r.Diagnostics
	case "data":
		r, err := srv.ValidateDataResourceConfig(ctx, &tfprotov6.ValidateDataResourceConfigRequest{TypeName: c.typ, Config: &dv})
		if err != nil {
			t.Fatal(err)
		}
		diags = r.Diagnostics
	case "provider":
		r, err := srv.ValidateProviderConfig(ctx, &tfprotov6.ValidateProviderConfigRequest{Config: &dv})
		if err != nil {
			t.Fatal(err)
		}
		diags = r.Diagnostics
	}
	var errs, warns []string
	for _, d := range diags {
		switch d.Severity {
		case tfprotov6.DiagnosticSeverityError:
			errs = append(errs, d.Summary+": "+d.Detail)
		case tfprotov6.DiagnosticSeverityWarning:
			warns = append(warns, d.Summary+": "+d.Detail)
		}
	}
	if c.warn != "" && !strings.Contains(strings.Join(warns, "\n"), c.warn) {
		t.Errorf("warnings %q do not say %q", warns, c.warn)
	}
	if c.warn == "" && c.want == "" && len(warns) > 0 {
		t.Errorf("unexpected warnings %q", warns)
	}
	switch {
	case c.want == "" && len(errs) > 0:
		t.Errorf("a valid configuration was refused: %q", errs)
	case c.want != "" && len(errs) == 0:
		t.Errorf("accepted; want an error with %q", c.want)
	case c.want != "" && !strings.Contains(strings.Join(errs, "\n"), c.want):
		t.Errorf("errors %q do not say %q", errs, c.want)
	}
}

// with returns a copy of base with the dotted keys set (a key with one dot
// sets an attribute of a nested object).
func with(base map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		if m, ok := v.(map[string]any); ok {
			v = with(m)
		}
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if outer, inner, ok := strings.Cut(k, "."); ok {
			m, _ := out[outer].(map[string]any)
			out[outer] = with(m, inner, kv[i+1])
			continue
		}
		out[k] = kv[i+1]
	}
	return out
}

func TestValidateRefusesBadInput(t *testing.T) {
	srv := providerserver.NewProtocol6(provider.New("test")())()
	schemas, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	head := map[string]any{"ssh_host": "10.0.0.1"}
	cluster := map[string]any{"head": head}
	container := func(kv ...any) map[string]any {
		return with(cluster, "runtime", map[string]any{"container": with(map[string]any{"image": "spark-lab/node:1"}, kv...)})
	}
	worker := func(name string) map[string]any {
		return with(cluster, "workers", map[string]any{name: map[string]any{"ssh_host": "10.0.0.2"}})
	}
	vllm := map[string]any{"head": head, "ray_address": "10.0.0.1:6379", "model": "/models/tiny"}
	cases := []validateCase{
		{"cluster: valid", "resource", "spark_ray_cluster", with(cluster, "env", map[string]any{"NCCL_SOCKET_IFNAME": "enp1s0"},
			"start_args", []any{"--object-store-memory=1000000000"}, "dashboard_host", "0.0.0.0",
			"head.resources", map[string]any{"spark.head": 1}, "head.labels", map[string]any{"lab.example/rack": "r1"}), "", ""},
		{"cluster: env key", "resource", "spark_ray_cluster", with(cluster, "env", map[string]any{"-S/bin/sh": "x"}), "not an environment variable name", ""},
		{"cluster: secret in env", "resource", "spark_ray_cluster", with(cluster, "env", map[string]any{"WANDB_API_KEY": "x"}), "give it in secret_env_wo", ""},
		{"cluster: secret_env_wo", "resource", "spark_ray_cluster", with(cluster, "secret_env_wo", map[string]any{"WANDB_API_KEY": "x"}, "secret_env_wo_version", 1), "", ""},
		{"cluster: secret_env_wo key", "resource", "spark_ray_cluster", with(cluster, "secret_env_wo", map[string]any{"A B": "x"}), "not an environment variable name", ""},
		{"cluster: dashboard_host", "resource", "spark_ray_cluster", with(cluster, "dashboard_host", "head.local"), "not an IP address", ""},
		{"cluster: resource named GPU", "resource", "spark_ray_cluster", with(cluster, "head.resources", map[string]any{"GPU": 1}), "one of Ray's own", ""},
		{"cluster: a node:<ip> resource", "resource", "spark_ray_cluster", with(cluster, "head.resources", map[string]any{"node:10.0.0.9": 1}), "vLLM pins its", ""},
		{"cluster: negative resource", "resource", "spark_ray_cluster", with(cluster, "head.resources", map[string]any{"x": -1}), "nonnegative", ""},
		{"cluster: label key", "resource", "spark_ray_cluster", with(cluster, "head.labels", map[string]any{"ray.io/node-id": "x"}), "reserved", ""},
		{"cluster: start_args --head", "resource", "spark_ray_cluster", with(cluster, "start_args", []any{"--head"}), "sets itself", ""},
		{"cluster: start_args dashboard", "resource", "spark_ray_cluster", with(cluster, "start_args", []any{"--dashboard-host=0.0.0.0"}), "use dashboard_host", ""},
		{"cluster: worker named head", "resource", "spark_ray_cluster", worker("head"), "the name the provider gives the head", ""},
		{"cluster: worker name with /", "resource", "spark_ray_cluster", worker("a/b"), "1 to 63", ""},
		{"cluster: empty ssh_user", "resource", "spark_ray_cluster", with(cluster, "head.ssh_user", ""), "give an SSH user", ""},
		{"cluster: worker empty ssh_user", "resource", "spark_ray_cluster",
			with(cluster, "workers", map[string]any{"w1": map[string]any{"ssh_host": "10.0.0.2", "ssh_user": ""}}), "give an SSH user", ""},
		{"cluster: host ray_command", "resource", "spark_ray_cluster",
			with(cluster, "runtime", map[string]any{"host": map[string]any{"ray_command": "-x"}}), "reads as an option", ""},
		{"cluster: container valid", "resource", "spark_ray_cluster", container("shm_size", "16GiB", "run_args", []any{"-v", "/opt/ray:/opt/ray:ro"}), "", ""},
		{"cluster: shm_size", "resource", "spark_ray_cluster", container("shm_size", "ten gigs"), "not a size docker reads", ""},
		{"cluster: image", "resource", "spark_ray_cluster", container("image", "--privileged"), "reads as an option", ""},
		{"cluster: container name", "resource", "spark_ray_cluster", container("name", "a b"), "not a container name", ""},
		{"cluster: gpus", "resource", "spark_ray_cluster", container("gpus", "--all"), "not a --gpus value", ""},
		{"cluster: run_args --network", "resource", "spark_ray_cluster", container("run_args", []any{"--network=bridge"}), "host's network", ""},
		{"cluster: container ray_command", "resource", "spark_ray_cluster", container("ray_command", ""), "is empty", ""},

		{"vllm: runtime and ray_address from the cluster", "resource", "spark_vllm_deployment",
			with(vllm, "runtime", unknown, "ray_address", unknown, "head", unknown, "api_key_wo", "k"), "", ""},
		{"cluster: values from elsewhere", "resource", "spark_ray_cluster",
			with(cluster, "env", unknown, "runtime", unknown, "workers", unknown, "start_args", unknown), "", ""},
		{"vllm: valid", "resource", "spark_vllm_deployment", with(vllm, "extra_args", []any{"--enforce-eager", "--max-model-len", "512", ""},
			"env", map[string]any{"HF_HUB_OFFLINE": "1"}, "secret_env_wo", map[string]any{"HF_TOKEN": "x"}, "api_key_wo", "k"), "", ""},
		{"vllm: HF_TOKEN in env", "resource", "spark_vllm_deployment", with(vllm, "env", map[string]any{"HF_TOKEN": "x"}), "give it in secret_env_wo", ""},
		{"vllm: VLLM_API_KEY in env", "resource", "spark_vllm_deployment", with(vllm, "env", map[string]any{"VLLM_API_KEY": "k"}), "give it in api_key_wo", ""},
		{"vllm: empty model", "resource", "spark_vllm_deployment", with(vllm, "model", ""), "give a model", ""},
		{"vllm: a flag as the model", "resource", "spark_vllm_deployment", with(vllm, "model", "--port=9000"), "read it as a flag", ""},
		{"vllm: --hf-token in extra_args", "resource", "spark_vllm_deployment", with(vllm, "extra_args", []any{"--hf-token=hf_x"}), "HF_TOKEN", ""},
		{"vllm: empty served_model_name", "resource", "spark_vllm_deployment", with(vllm, "served_model_name", " "), "give the name clients use", ""},
		{"vllm: ray_address", "resource", "spark_vllm_deployment", with(vllm, "ray_address", "head:6379"), "not <ip>:<port>", ""},
		{"vllm: extra_args -tp", "resource", "spark_vllm_deployment", with(vllm, "extra_args", []any{"--tensor_parallel_size=2"}), "use tensor_parallel_size", ""},
		{"vllm: extra_args --api-key", "resource", "spark_vllm_deployment", with(vllm, "extra_args", []any{"--api-key", "k"}), "api_key_wo", ""},
		{"vllm: empty api key", "resource", "spark_vllm_deployment", with(vllm, "api_key_wo", ""), "serves without authentication", ""},
		{"vllm: api_key_file", "resource", "spark_vllm_deployment", with(vllm, "api_key_file", ""), "is empty", ""},
		{"vllm: vllm_command", "resource", "spark_vllm_deployment", with(vllm, "vllm_command", "-m"), "reads as an option", ""},
		{"vllm: secret_env_wo key", "resource", "spark_vllm_deployment", with(vllm, "secret_env_wo", map[string]any{"HF TOKEN": "x"}), "not an environment variable name", ""},
		{"vllm: env key", "resource", "spark_vllm_deployment", with(vllm, "env", map[string]any{"1X": "y"}), "not an environment variable name", ""},
		{name: "vllm: every address, no key", kind: "resource", typ: "spark_vllm_deployment", config: vllm, warn: "anyone who reaches the head's port"},
		{"vllm: every address, key in secret_env_wo", "resource", "spark_vllm_deployment", with(vllm, "secret_env_wo", map[string]any{"VLLM_API_KEY": "k"}), "", ""},
		{"vllm: loopback, no key", "resource", "spark_vllm_deployment", with(vllm, "host", "127.0.0.1"), "", ""},
		{"vllm: host not an address", "resource", "spark_vllm_deployment", with(vllm, "host", "head.local"), "not an IP address", ""},
		{"vllm: port is the GCS port", "resource", "spark_vllm_deployment", with(vllm, "port", 6379), "is the GCS port", ""},
		{"vllm: default port is the GCS port", "resource", "spark_vllm_deployment", with(vllm, "ray_address", "10.0.0.1:8000"), "is the GCS port", ""},
		{"vllm: head ssh_user", "resource", "spark_vllm_deployment", with(vllm, "head.ssh_user", ""), "give an SSH user", ""},

		{"spark_node: valid", "data", "spark_node", map[string]any{"ssh_host": "10.0.0.1", "ray_command": "/opt/ray/bin/ray"}, "", ""},
		{"spark_node: ray_command", "data", "spark_node", map[string]any{"ssh_host": "10.0.0.1", "ray_command": ""}, "is empty", ""},
		{"spark_node: python_command", "data", "spark_node", map[string]any{"ssh_host": "10.0.0.1", "python_command": "-c"}, "reads as an option", ""},
		{"spark_node: ssh_user", "data", "spark_node", map[string]any{"ssh_host": "10.0.0.1", "ssh_user": ""}, "give an SSH user", ""},
		{"spark_ray_nodes: ray_address", "data", "spark_ray_nodes", map[string]any{"ssh_host": "10.0.0.1", "ray_address": "10.0.0.1"}, "not <ip>:<port>", ""},
		{"spark_ray_nodes: container", "data", "spark_ray_nodes", map[string]any{"ssh_host": "10.0.0.1", "container": "-x"}, "not a container name", ""},

		{"provider: valid", "provider", "", map[string]any{"ssh": map[string]any{"user": "ops"}}, "", ""},
		{"provider: ssh.user", "provider", "", map[string]any{"ssh": map[string]any{"user": ""}}, "give an SSH user", ""},
		{"provider: bastion.host", "provider", "", map[string]any{"ssh": map[string]any{"bastion": map[string]any{"host": ""}}}, "the bastion's address", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, srv, schemas) })
	}
}
