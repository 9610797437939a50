package provider_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
	"github.com/lab-infra/terraform-provider-spark/internal/provider"
)

// planned builds a planned value: what config gives, computed attributes it
// leaves out unknown (as Terraform plans them), the rest null.
func planned(t *testing.T, attrs []*tfprotov6.SchemaAttribute, typ tftypes.Object, m map[string]any) tftypes.Value {
	t.Helper()
	out := map[string]tftypes.Value{}
	byName := map[string]*tfprotov6.SchemaAttribute{}
	for _, a := range attrs {
		byName[a.Name] = a
	}
	for name, at := range typ.AttributeTypes {
		a := byName[name]
		v, given := m[name]
		switch {
		case given && a.NestedType != nil && a.NestedType.Nesting == tfprotov6.SchemaObjectNestingModeSingle:
			out[name] = planned(t, a.NestedType.Attributes, at.(tftypes.Object), v.(map[string]any))
		case given && a.NestedType != nil && a.NestedType.Nesting == tfprotov6.SchemaObjectNestingModeMap:
			elems := map[string]tftypes.Value{}
			et := at.(tftypes.Map).ElementType.(tftypes.Object)
			for k, e := range v.(map[string]any) {
				elems[k] = planned(t, a.NestedType.Attributes, et, e.(map[string]any))
			}
			out[name] = tftypes.NewValue(at, elems)
		case given:
			out[name] = value(t, at, v)
		case a.Computed:
			out[name] = tftypes.NewValue(at, tftypes.UnknownValue)
		default:
			out[name] = tftypes.NewValue(at, nil)
		}
	}
	return tftypes.NewValue(typ, out)
}

// Ctrl-C during `terraform apply` makes Terraform call StopProvider, which
// cancels the apply's context. Interrupted while the head's `ray start` runs
// (detached from the SSH session by setsid, so it outlives the session), the
// create must leave nothing behind: no Ray daemon and no `ray start` on any
// node, so the next apply starts from a clean node instead of failing on a
// GCS port held by an orphan.
func TestAccFault_interruptedCreateLeavesNothingRunning(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	ctx := context.Background()
	srv := providerserver.NewProtocol6(provider.New("test")())()
	schemas, err := srv.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ptyp := schemas.Provider.ValueType()
	pcfg, _ := tfprotov6.NewDynamicValue(ptyp, value(t, ptyp, map[string]any{"ssh": map[string]any{
		"user": l.SSHUser, "private_key_file": l.PrivateKeyFile, "known_hosts_file": l.KnownHostsFile, "connect_timeout": "10s"}}))
	if r, err := srv.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{TerraformVersion: "1.8.5", Config: &pcfg}); err != nil || diagsErr(r.Diagnostics) != "" {
		t.Fatalf("configure: %v %s", err, diagsErr(r.Diagnostics))
	}
	sch := schemas.ResourceSchemas["spark_ray_cluster"]
	typ := sch.ValueType().(tftypes.Object)
	config := map[string]any{
		"head":    map[string]any{"ssh_host": head.SSHHost, "num_gpus": 1},
		"workers": map[string]any{w.Name: map[string]any{"ssh_host": w.SSHHost, "num_gpus": 1}},
		"runtime": map[string]any{"host": map[string]any{"ray_command": head.RayCommand}},
	}
	cfgVal, _ := tfprotov6.NewDynamicValue(typ, value(t, typ, copyMap(config)))
	plan := copyMap(config)
	plan["gcs_port"], plan["dashboard_host"], plan["auth_mode"] = 6379, "127.0.0.1", "token"
	planVal, _ := tfprotov6.NewDynamicValue(typ, planned(t, sch.Block.Attributes, typ, plan))
	prior, _ := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, nil))

	// Ctrl-C once the head's ray start is running.
	applyCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	sawStart := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			if out, _ := lab.Exec(ctx, head, "sh", "-c", "pgrep -f '(^|/)ray start( |$)' || true"); strings.TrimSpace(out) != "" {
				time.Sleep(500 * time.Millisecond)
				if _, err := srv.StopProvider(ctx, &tfprotov6.StopProviderRequest{}); err != nil {
					t.Errorf("StopProvider: %v", err)
				}
				cancel()
				sawStart <- true
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		sawStart <- false
	}()
	resp, err := srv.ApplyResourceChange(applyCtx, &tfprotov6.ApplyResourceChangeRequest{
		TypeName: "spark_ray_cluster", PriorState: &prior, PlannedState: &planVal, Config: &cfgVal})
	if !<-sawStart {
		t.Fatal("the head's ray start was never seen running: the interruption was not exercised")
	}
	if err == nil && diagsErr(resp.Diagnostics) == "" {
		t.Fatal("the interrupted create reported success")
	}
	t.Logf("interrupted create reported: %s", diagsErr(resp.Diagnostics))
	for _, n := range []lab.Node{head, w} {
		out, err := lab.Exec(ctx, n, "sh", "-c", "pgrep -a -x raylet; pgrep -a -x gcs_server; pgrep -af '(^|/)ray start( |$)'; true")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("after the interrupted create, %s still runs Ray (%v):\n%s", n.Name, err, out)
		}
	}
}

func diagsErr(ds []*tfprotov6.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			b.WriteString(d.Summary + ": " + d.Detail + "\n")
		}
	}
	return b.String()
}

func copyMap(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if mm, ok := v.(map[string]any); ok {
			v = copyMap(mm)
		}
		out[k] = v
	}
	return out
}
