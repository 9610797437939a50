package provider

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"golang.org/x/crypto/ssh"
)

// configure runs the provider's Configure with ssh attributes set as given
// (strings; tftypes.UnknownValue for "unknown") and the rest null.
func configure(t *testing.T, ssh map[string]any) provider.ConfigureResponse {
	t.Helper()
	ctx := context.Background()
	p := New("test")()
	var sr provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &sr)
	root := sr.Schema.Type().TerraformType(ctx).(tftypes.Object)
	sshType := root.AttributeTypes["ssh"].(tftypes.Object)
	sshVals := map[string]tftypes.Value{}
	for name, typ := range sshType.AttributeTypes {
		v, ok := ssh[name]
		if !ok {
			sshVals[name] = tftypes.NewValue(typ, nil)
			continue
		}
		sshVals[name] = tftypes.NewValue(typ, v)
	}
	raw := tftypes.NewValue(root, map[string]tftypes.Value{
		"ssh":          tftypes.NewValue(sshType, sshVals),
		"max_parallel": tftypes.NewValue(tftypes.Number, nil),
	})
	var resp provider.ConfigureResponse
	p.Configure(ctx, provider.ConfigureRequest{Config: tfsdk.Config{Schema: sr.Schema, Raw: raw}}, &resp)
	return resp
}

func keyFile(t *testing.T) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "test")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigureInsecureWarns(t *testing.T) {
	resp := configure(t, map[string]any{"user": "ops", "private_key_file": keyFile(t), "host_key_policy": "insecure"})
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	if resp.Diagnostics.WarningsCount() != 1 || !strings.Contains(resp.Diagnostics.Warnings()[0].Detail(), "insecure") {
		t.Fatalf("want one warning about the insecure policy, got %v", resp.Diagnostics)
	}
	if resp.ResourceData == nil || resp.DataSourceData == nil {
		t.Fatal("no provider data handed to resources")
	}
}

func TestConfigureStrictIsQuiet(t *testing.T) {
	resp := configure(t, map[string]any{"user": "ops", "private_key_file": keyFile(t), "known_hosts_file": os.DevNull})
	if resp.Diagnostics.HasError() || resp.Diagnostics.WarningsCount() != 0 {
		t.Fatalf("strict policy: %v", resp.Diagnostics)
	}
}

func TestConfigureUnknownIsAnErrorNotACrash(t *testing.T) {
	resp := configure(t, map[string]any{"user": tftypes.UnknownValue, "private_key_file": keyFile(t)})
	if !resp.Diagnostics.HasError() || !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), "ssh.user") {
		t.Fatalf("want an error naming ssh.user, got %v", resp.Diagnostics)
	}
}

func TestConfigureBadKeyFileNamesIt(t *testing.T) {
	resp := configure(t, map[string]any{"user": "ops", "private_key_file": "/nonexistent/id_ed25519"})
	if !resp.Diagnostics.HasError() || !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), "/nonexistent/id_ed25519") {
		t.Fatalf("want an error naming the key file, got %v", resp.Diagnostics)
	}
}
