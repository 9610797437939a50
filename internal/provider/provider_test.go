package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSchemaIsValid(t *testing.T) {
	var resp provider.SchemaResponse
	New("test")().Schema(context.Background(), provider.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	if diags := resp.Schema.ValidateImplementation(context.Background()); diags.HasError() {
		t.Fatal(diags)
	}
}

func TestPoolConfigPrefersConfigOverEnvironment(t *testing.T) {
	m := providerModel{SSH: &sshModel{
		User: types.StringValue("ops"), Port: types.Int64Value(2222),
		PrivateKeyFile: types.StringValue("/keys/id"), HostKeyPolicy: types.StringValue("accept-new"),
		ConnectTimeout: types.StringValue("5s"), UseAgent: types.BoolNull(),
	}, MaxParallel: types.Int64Value(4)}
	cfg, err := poolConfig(m, env(map[string]string{
		"SPARK_SSH_USER": "envuser", "SPARK_SSH_PORT": "2200", "SPARK_SSH_HOST_KEY_POLICY": "insecure",
		"SSH_AUTH_SOCK": "/tmp/agent.sock",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "ops" || cfg.Port != 2222 || cfg.Policy != transport.PolicyAcceptNew ||
		cfg.ConnectTimeout != 5*time.Second || cfg.MaxParallel != 4 || cfg.PrivateKeyFile != "/keys/id" {
		t.Fatalf("config did not win: %+v", cfg)
	}
	if cfg.UseAgent {
		t.Fatal("agent enabled although a key file is given")
	}
}

func TestPoolConfigEnvironmentFallbacks(t *testing.T) {
	cfg, err := poolConfig(providerModel{}, env(map[string]string{
		"SPARK_SSH_USER": "envuser", "SPARK_SSH_PORT": "2200", "SPARK_SSH_PRIVATE_KEY_FILE": "/k",
		"SPARK_SSH_KNOWN_HOSTS_FILE": "/kh", "SPARK_SSH_HOST_KEY_POLICY": "strict",
		"SPARK_SSH_CONNECT_TIMEOUT": "3s", "SPARK_SSH_BASTION_HOST": "jump", "SPARK_SSH_BASTION_PORT": "2022",
		"SPARK_SSH_BASTION_USER": "hop", "SPARK_MAX_PARALLEL": "8",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "envuser" || cfg.Port != 2200 || cfg.PrivateKeyFile != "/k" || cfg.KnownHostsFile != "/kh" ||
		cfg.ConnectTimeout != 3*time.Second || cfg.MaxParallel != 8 ||
		cfg.Bastion == nil || cfg.Bastion.Host != "jump" || cfg.Bastion.Port != 2022 || cfg.Bastion.User != "hop" {
		t.Fatalf("environment not used: %+v (bastion %+v)", cfg, cfg.Bastion)
	}
}

func TestPoolConfigAgentDefault(t *testing.T) {
	cfg, err := poolConfig(providerModel{}, env(map[string]string{"SSH_AUTH_SOCK": "/tmp/a"}))
	if err != nil || !cfg.UseAgent {
		t.Fatalf("agent should be on when SSH_AUTH_SOCK is set and no key is given (%v)", err)
	}
}

func TestPoolConfigRejectsBadEnvironment(t *testing.T) {
	for k, v := range map[string]string{
		"SPARK_SSH_PORT": "twenty-two", "SPARK_MAX_PARALLEL": "-1",
		"SPARK_SSH_CONNECT_TIMEOUT": "soon", "SPARK_SSH_USE_AGENT": "maybe",
	} {
		_, err := poolConfig(providerModel{}, env(map[string]string{k: v}))
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("%s=%q: want an error naming the value, got %v", k, v, err)
		}
	}
}

func TestUnknownAttributesAreNamed(t *testing.T) {
	ctx := context.Background()
	var sr provider.SchemaResponse
	New("test")().Schema(ctx, provider.SchemaRequest{}, &sr)
	st := tfsdk.State{Schema: sr.Schema, Raw: tftypes.NewValue(sr.Schema.Type().TerraformType(ctx), nil)}
	for _, p := range []path.Path{path.Root("ssh").AtName("user"), path.Root("ssh").AtName("bastion").AtName("host")} {
		if d := st.SetAttribute(ctx, p, types.StringUnknown()); d.HasError() {
			t.Fatal(d)
		}
	}
	got := strings.Join(unknownAttributes(st.Raw), ",")
	if got != "ssh.bastion.host,ssh.user" {
		t.Fatalf("unknown attributes = %q", got)
	}
}

func TestExpandHome(t *testing.T) {
	t.Setenv("HOME", "/home/ops")
	if got := expandHome("~/.ssh/id_ed25519"); got != "/home/ops/.ssh/id_ed25519" {
		t.Fatalf("expandHome = %q", got)
	}
	if got := expandHome("/abs/~/x"); got != "/abs/~/x" {
		t.Fatalf("expandHome changed an absolute path: %q", got)
	}
}
