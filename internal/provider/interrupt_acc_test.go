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

// driver speaks the provider protocol as Terraform does, so a test can do
// what the test framework cannot: cancel an apply half-way (Ctrl-C).
type driver struct {
	t       *testing.T
	srv     tfprotov6.ProviderServer
	schemas *tfprotov6.GetProviderSchemaResponse
}

func newDriver(t *testing.T, l *lab.File) *driver {
	t.Helper()
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
	return &driver{t: t, srv: srv, schemas: schemas}
}

func (d *driver) typ(name string) tftypes.Object {
	return d.schemas.ResourceSchemas[name].ValueType().(tftypes.Object)
}

// plan plans a create of config (nil: a destroy of prior) as Terraform
// would, and returns the config and the planned state.
func (d *driver) plan(name string, config map[string]any, prior *tfprotov6.DynamicValue) (cfg, planned *tfprotov6.DynamicValue) {
	d.t.Helper()
	typ := d.typ(name)
	var v tftypes.Value
	if config == nil {
		v = tftypes.NewValue(typ, nil)
	} else {
		v = value(d.t, typ, copyMap(config))
	}
	c, _ := tfprotov6.NewDynamicValue(typ, v)
	if prior == nil {
		p, _ := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, nil))
		prior = &p
	}
	resp, err := d.srv.PlanResourceChange(context.Background(), &tfprotov6.PlanResourceChangeRequest{
		TypeName: name, PriorState: prior, ProposedNewState: &c, Config: &c})
	if err != nil || diagsErr(resp.Diagnostics) != "" {
		d.t.Fatalf("plan %s: %v %s", name, err, diagsErr(resp.Diagnostics))
	}
	return &c, resp.PlannedState
}

// apply applies a plan; it returns the new state and the errors reported.
func (d *driver) apply(ctx context.Context, name string, prior, cfg, planned *tfprotov6.DynamicValue) (*tfprotov6.DynamicValue, string) {
	d.t.Helper()
	if prior == nil {
		typ := d.typ(name)
		p, _ := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, nil))
		prior = &p
	}
	resp, err := d.srv.ApplyResourceChange(ctx, &tfprotov6.ApplyResourceChangeRequest{
		TypeName: name, PriorState: prior, PlannedState: planned, Config: cfg})
	if err != nil {
		return nil, err.Error()
	}
	return resp.NewState, diagsErr(resp.Diagnostics)
}

// ctrlC presses Ctrl-C (StopProvider, then the apply's context cancelled,
// as Terraform does) settle after seen (a shell script, run on n as root
// with args as $1...) first prints something. It reports whether it did.
func (d *driver) ctrlC(n lab.Node, settle time.Duration, cancel context.CancelFunc, seen string, args ...string) <-chan bool {
	ctx := context.Background()
	pressed := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(3 * time.Minute)
		for time.Now().Before(deadline) {
			if out, _ := lab.Exec(ctx, n, append([]string{"sh", "-c", seen + " || true", "sh"}, args...)...); strings.TrimSpace(out) != "" {
				time.Sleep(settle)
				if _, err := d.srv.StopProvider(ctx, &tfprotov6.StopProviderRequest{}); err != nil {
					d.t.Errorf("StopProvider: %v", err)
				}
				cancel()
				pressed <- true
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		pressed <- false
	}()
	return pressed
}

// nothingRuns fails the test when any of the looks finds something on
// any of the nodes. It looks as the provider's SSH user (its private
// directory is under its own uid; every process is visible to it).
func nothingRuns(t *testing.T, what string, nodes []lab.Node, looks ...acctest.Look) {
	t.Helper()
	user := acctest.Lab(t).SSHUser
	for _, n := range nodes {
		out, err := acctest.RunningAs(n, user, looks...)
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("after the interrupted create, %s still runs %s (%v):\n%s", n.Name, what, err, out)
		}
	}
}

// Ctrl-C during `terraform apply` makes Terraform call StopProvider, which
// cancels the apply's context. Interrupted while the head's or a worker's
// `ray start` runs (detached from the SSH session by setsid, so it outlives
// the session), the create must leave nothing behind: no Ray daemon and no
// `ray start` on any node, no start marker, so the next apply starts from
// clean nodes instead of failing on a GCS port held by an orphan.
func TestAccFault_interruptedCreateLeavesNothingRunning(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	config := map[string]any{
		"head":    map[string]any{"ssh_host": head.SSHHost, "num_gpus": 1},
		"workers": map[string]any{w.Name: map[string]any{"ssh_host": w.SSHHost, "num_gpus": 1}},
		"runtime": map[string]any{"host": map[string]any{"ray_command": head.RayCommand}},
	}
	for _, c := range []struct {
		name  string
		watch lab.Node
	}{{"head starting", head}, {"workers starting", w}} {
		t.Run(c.name, func(t *testing.T) {
			d := newDriver(t, l)
			cfg, planned := d.plan("spark_ray_cluster", config, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pressed := d.ctrlC(c.watch, 500*time.Millisecond, cancel, `pgrep -f '(^|/)ray start( |$)'`)
			_, errs := d.apply(ctx, "spark_ray_cluster", nil, cfg, planned)
			if !<-pressed {
				t.Fatalf("ray start was never seen running on %s: the interruption was not exercised", c.watch.Name)
			}
			if errs == "" {
				t.Fatal("the interrupted create reported success")
			}
			t.Logf("interrupted create reported: %s", errs)
			nothingRuns(t, "Ray", []lab.Node{head, w}, acctest.RayDaemons, acctest.RayStart)
			nothingRuns(t, "a start marker", []lab.Node{head}, `find /tmp/terraform-provider-spark-$(id -u) -maxdepth 1 -name 'ray-*.starting'`)
		})
	}
}

// The same while vLLM loads its model (vllm serve detached by setsid): the
// create stops the server it started, with its process group (vLLM's
// EngineCore), closes nothing it did not open, and removes its start
// marker; the cluster under it stays as it was.
func TestAccFault_interruptedVLLMLaunchLeavesNothingRunning(t *testing.T) {
	l := acctest.Lab(t)
	head := l.Nodes[0]
	d := newDriver(t, l)
	cluster := map[string]any{
		"head":    map[string]any{"ssh_host": head.SSHHost, "num_gpus": 1},
		"runtime": map[string]any{"host": map[string]any{"ray_command": head.RayCommand}},
	}
	cfg, planned := d.plan("spark_ray_cluster", cluster, nil)
	state, errs := d.apply(context.Background(), "spark_ray_cluster", nil, cfg, planned)
	if errs != "" {
		t.Fatalf("create the cluster: %s", errs)
	}
	t.Cleanup(func() {
		cfg, planned := d.plan("spark_ray_cluster", nil, state)
		if _, errs := d.apply(context.Background(), "spark_ray_cluster", state, cfg, planned); errs != "" {
			t.Errorf("destroy the cluster: %s", errs)
		}
		nothingRuns(t, "Ray", l.Nodes, acctest.RayDaemons, acctest.RayStart)
	})
	sv, err := state.Unmarshal(d.typ("spark_ray_cluster"))
	if err != nil {
		t.Fatal(err)
	}
	var attrs map[string]tftypes.Value
	var headAddress string
	if err := sv.As(&attrs); err != nil || attrs["head_address"].As(&headAddress) != nil || headAddress == "" {
		t.Fatalf("the cluster's head_address: %v", err)
	}
	before := acctest.Snapshot(t, l, acctest.RayDaemons)

	deployment := map[string]any{
		"head":                 map[string]any{"ssh_host": head.SSHHost},
		"runtime":              map[string]any{"host": map[string]any{"ray_command": head.RayCommand}},
		"ray_address":          headAddress,
		"model":                head.ModelPath,
		"served_model_name":    "tiny",
		"vllm_command":         head.VLLMCommand,
		"env":                  map[string]any{"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
		"extra_args":           []any{"--dtype", "float32", "--max-model-len", "256", "--enforce-eager"},
		"tensor_parallel_size": 1,
	}
	cfg, planned = d.plan("spark_vllm_deployment", deployment, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pressed := d.ctrlC(head, 3*time.Second, cancel, `pgrep -f '[v]llm serve'`)
	_, errs = d.apply(ctx, "spark_vllm_deployment", nil, cfg, planned)
	if !<-pressed {
		t.Fatal("vllm serve was never seen running on the head: the interruption was not exercised")
	}
	if errs == "" {
		t.Fatal("the interrupted create reported success")
	}
	t.Logf("interrupted create reported: %s", errs)
	nothingRuns(t, "vLLM", []lab.Node{head}, acctest.VLLMServe, acctest.VLLMEngine, acctest.VLLMPort)
	nothingRuns(t, "a start marker or an env file", []lab.Node{head}, `find /tmp/terraform-provider-spark-$(id -u)/vllm-8000 -maxdepth 1 -name starting -o -name env`)
	if after := acctest.Snapshot(t, l, acctest.RayDaemons); after != before {
		t.Errorf("the interrupted launch changed the cluster's Ray.\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Ctrl-C while spark_model copies (the target's receiver running, the
// file half there): the create reports the interruption and records
// nothing; no end of the copy is left running on either node; the target
// holds the file as <name>.partial only, never under its name. The next
// apply converges: it sends the rest, and the file is whole.
func TestAccFault_interruptedModelCopyConverges(t *testing.T) {
	l := acctest.Lab(t)
	src, target := l.Nodes[0], l.Nodes[1]
	const base = "/tmp/spark-acc-interrupt"
	for _, n := range l.Nodes {
		acctest.OnNode(t, n, "clear the model's directories", `rm -rf -- "$1"`, base)
	}
	t.Cleanup(func() {
		for _, n := range l.Nodes {
			_, _ = lab.Exec(context.Background(), n, "rm", "-rf", "--", base)
		}
	})
	// 2 GiB of zeros, sparse on the source: a copy of a second or two.
	acctest.OnNodeAs(t, src, l.SSHUser, "make a model", `mkdir -p "$1" && truncate -s 2G "$1/model.safetensors" && echo '{}' > "$1/config.json"`, base+"/src")
	config := map[string]any{
		"source":  map[string]any{"ssh_host": src.SSHHost, "path": base + "/src"},
		"targets": map[string]any{target.Name: map[string]any{"ssh_host": target.SSHHost, "address": target.FabricIP, "path": base + "/dst"}},
	}
	d := newDriver(t, l)
	cfg, planned := d.plan("spark_model", config, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Pressed once the receiver has written some of the file but not all
	// of it (under 2 GiB, in KiB), not at a fixed time after it starts:
	// before the first bytes there is no .partial (CI once pressed 300 ms
	// after the receiver started, and the target held nothing), and once
	// the file is whole the receiver hashes and renames it.
	pressed := d.ctrlC(target, 0, cancel, `pgrep -f '[d]ef receive' >/dev/null && find "$1" -name '*.partial' -size +0c -size -2097152k`, base+"/dst")
	state, errs := d.apply(ctx, "spark_model", nil, cfg, planned)
	if !<-pressed {
		t.Fatal("the receiver was never seen running on the target: the interruption was not exercised")
	}
	if errs == "" {
		t.Fatal("the interrupted copy reported success")
	}
	if state != nil {
		if v, err := state.Unmarshal(d.typ("spark_model")); err == nil && !v.IsNull() {
			t.Errorf("the interrupted create recorded a state: %v", v)
		}
	}
	t.Logf("interrupted copy reported: %s", errs)
	// Both ends stop: killed with their SSH session, or at the latest by
	// their own 60 s timeouts.
	copying := acctest.Look(`pgrep -af '[d]ef receive'; pgrep -af '[c]annot reach the receiver'`)
	deadline := time.Now().Add(90 * time.Second)
	for {
		left := acctest.Snapshot(t, l, copying)
		if !strings.Contains(left, "receive") && !strings.Contains(left, "reach") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("an end of the copy still runs:\n%s", left)
		}
		time.Sleep(time.Second)
	}
	held := acctest.OnNodeAs(t, target, l.SSHUser, "look at the copy", `cd "$1" && ls; stat -c %s model.safetensors.partial 2>/dev/null`, base+"/dst")
	if strings.Contains(held, "model.safetensors\n") || !strings.Contains(held, "model.safetensors.partial") {
		t.Fatalf("after the interruption the target holds:\n%s\nwant model.safetensors.partial only", held)
	}

	d = newDriver(t, l)
	cfg, planned = d.plan("spark_model", config, nil)
	state, errs = d.apply(context.Background(), "spark_model", nil, cfg, planned)
	if errs != "" {
		t.Fatalf("the next apply: %s", errs)
	}
	got := acctest.OnNodeAs(t, target, l.SSHUser, "hash the copy", `cd "$1" && ls && sha256sum model.safetensors | cut -c1-64`, base+"/dst")
	want := acctest.OnNodeAs(t, src, l.SSHUser, "hash the source", `cd "$1" && ls && sha256sum model.safetensors | cut -c1-64`, base+"/src")
	if got != want {
		t.Errorf("after the next apply the target holds:\n%s\nthe source:\n%s", got, want)
	}
	cfg, planned = d.plan("spark_model", nil, state)
	if _, errs := d.apply(context.Background(), "spark_model", state, cfg, planned); errs != "" {
		t.Errorf("destroy: %s", errs)
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
