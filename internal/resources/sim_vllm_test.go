package resources_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/lab-infra/terraform-provider-spark/internal/sim"
)

const deploymentType = "spark_vllm_deployment"

// simDeploy is a spark_vllm_deployment on the simulated nodes' head (node
// 0), joining the cluster there: the builder of its configuration in these
// tests (as deploy is on the lab). vllm_command is given, as on the lab.
type simDeploy struct {
	rayAddress any            // ray_address; nil: the cluster's on node 0, GCS port 6379
	extra      map[string]any // more attributes
}

const vllmCommand = "/opt/ray/bin/vllm"

func (d simDeploy) config(l *simLab) map[string]any {
	addr := d.rayAddress
	if addr == nil {
		addr = fabricIP(0) + ":6379"
	}
	cfg := map[string]any{"head": map[string]any{"ssh_host": l.host(0)}, "ray_address": addr, "model": "tiny-llama",
		"vllm_command": vllmCommand}
	for k, v := range d.extra {
		cfg[k] = v
	}
	return cfg
}

// withCluster is two simulated nodes that run a spark_ray_cluster (head
// on node 0, worker w1 on node 1, a GPU each), created by an earlier apply.
func withCluster(t *testing.T) *simLab {
	t.Helper()
	l := newSimLab(t, 2)
	l.converge(clusterType, simCluster{workers: map[string]int{"w1": 1}}.config(l), sim.State{})
	return l
}

// A deployment's life on the cluster's head: the plan concludes where vLLM
// places its workers before anything starts; create waits until the server
// answers a completion (through the SSH tunnel, with the write-only key);
// a change of what it serves restarts it; a server found unhealthy or dead
// is named by the refresh and restarted; destroy stops it.
func TestSimVLLMDeployment_lifecycle(t *testing.T) {
	l := withCluster(t)
	d := simDeploy{extra: map[string]any{"api_key_wo": "sk-sim", "api_key_wo_version": 1}}
	id, endpoint := l.host(0)+":8000", "http://"+l.host(0)+":8000/v1"

	p, st := l.converge(deploymentType, d.config(l), sim.State{})
	noDiagnostics(t, "the create's plan", p.Diagnostics)
	expectValues(t, "the create's plan", p.Planned, map[string]string{
		"id": id, "endpoint": endpoint, "status": "serving", "served_model_name": "tiny-llama", "port": "8000",
		"placement_ip": fabricIP(0), "vllm_version": sim.VLLMVersion, "executor": "RayExecutorV2", "placement_pinned": "false",
		"process_identity": "<unknown>", "api_key_wo": "<null>",
	})
	identity, served, env, ok := l.model.VLLM(0, 8000)
	if !ok || served != "tiny-llama" || env["VLLM_API_KEY"] != "sk-sim" || env["RAY_ADDRESS"] != fabricIP(0)+":6379" {
		t.Fatalf("vllm serve after the create: %v %q %v", ok, served, env)
	}
	expectValues(t, "the created state", st.Value, map[string]string{
		"id": id, "process_identity": identity, "status": "serving", "api_key_wo": "<null>", "executor": "RayExecutorV2"})

	p = l.mustPlan(deploymentType, d.config(l), st)
	if ch := p.Changes(); ch != "" {
		t.Errorf("a plan of the serving deployment changes:\n%s", ch)
	}
	noDiagnostics(t, "no-change plan", append(p.RefreshDiagnostics, p.Diagnostics...))

	// A change the server was not started with: updated in place, the
	// server keeps running.
	d.extra["timeouts"] = map[string]any{"create": "30m"}
	p, st = l.converge(deploymentType, d.config(l), st)
	expectValues(t, "the plan of new timeouts", p.Planned, map[string]string{"process_identity": identity, "timeouts.create": "30m"})
	if next, _, _, _ := l.model.VLLM(0, 8000); next != identity || show(t, st.Value, "process_identity") != identity {
		t.Errorf("new timeouts restarted the server: %s, state %s", next, show(t, st.Value, "process_identity"))
	}

	// What it serves changes: the server restarts.
	d.extra["served_model_name"] = "tiny"
	p, st = l.converge(deploymentType, d.config(l), st)
	expectValues(t, "the plan of a new served name", p.Planned, map[string]string{
		"served_model_name": "tiny", "process_identity": "<unknown>", "status": "serving"})
	next, served, _, _ := l.model.VLLM(0, 8000)
	if next == identity || served != "tiny" || show(t, st.Value, "process_identity") != next {
		t.Errorf("after the restart: process %s serving %q, state %s", next, served, show(t, st.Value, "process_identity"))
	}
	identity = next

	// /health fails: the refresh says so, and the plan restarts it (its
	// own port and GPUs are not held against it: its process runs).
	if err := l.model.SetVLLMHealth(0, 8000, http.StatusInternalServerError); err != nil {
		t.Fatal(err)
	}
	p, st = l.converge(deploymentType, d.config(l), st)
	expectDiagnostic(t, p.RefreshDiagnostics, diagnostic{severity: warning, summary: "vLLM is not serving",
		detail: []string{"vllm serve on " + id + " (process " + identity + ") is unhealthy; the plan restarts it."}})
	expectValues(t, "the refreshed state of an unhealthy server", p.Refreshed, map[string]string{"status": "unhealthy"})
	expectValues(t, "the state after the unhealthy server's restart", st.Value, map[string]string{"status": "serving"})
	if next, _, _, _ := l.model.VLLM(0, 8000); next == identity {
		t.Errorf("the unhealthy server %s was not restarted", identity)
	}
	identity = show(t, st.Value, "process_identity")

	// The server dies: the refresh says so, the plan restarts it.
	if err := l.model.KillVLLM(0, 8000); err != nil {
		t.Fatal(err)
	}
	p, st = l.converge(deploymentType, d.config(l), st)
	expectDiagnostic(t, p.RefreshDiagnostics, diagnostic{severity: warning, summary: "vLLM is not serving",
		detail: []string{"(process " + identity + ") is stopped; the plan restarts it."}})
	expectValues(t, "the refreshed state of a dead server", p.Refreshed, map[string]string{"status": "stopped"})
	expectValues(t, "the plan of a dead server", p.Planned, map[string]string{"status": "serving", "process_identity": "<unknown>"})
	next, _, _, ok = l.model.VLLM(0, 8000)
	if !ok || next == identity || show(t, st.Value, "process_identity") != next || show(t, st.Value, "status") != "serving" {
		t.Errorf("after the restart: process %s (%v), state %s", next, ok, show(t, st.Value, "process_identity"))
	}

	// Destroy stops it and removes its env file, which holds the key.
	if err := l.terraform().Destroy(context.Background(), deploymentType, d.config(l), st); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if _, _, _, ok := l.model.VLLM(0, 8000); ok {
		t.Error("vllm serve still runs after the destroy")
	}
}

// An import adopts the running server: what it serves and how, read from
// its command line and environment; the first plan restarts nothing.
// Malformed IDs and a port where nothing listens are refused.
func TestSimVLLMDeployment_import(t *testing.T) {
	l := withCluster(t)
	d := simDeploy{extra: map[string]any{"served_model_name": "tiny", "host": "127.0.0.1",
		"extra_args": []any{"--max-model-len", "512"}, "env": map[string]any{"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "1"}}}
	_, created := l.converge(deploymentType, d.config(l), sim.State{})
	ctx := context.Background()

	st, err := l.terraform().Import(ctx, deploymentType, l.host(0)+":8000")
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	expectValues(t, "the imported state", st.Value, map[string]string{
		"id": l.host(0) + ":8000", "model": "tiny-llama", "served_model_name": "tiny", "tensor_parallel_size": "1",
		"pipeline_parallel_size": "1", "host": "127.0.0.1", "ray_address": fabricIP(0) + ":6379", "vllm_command": vllmCommand,
		"extra_args": `tftypes.List[tftypes.String]<tftypes.String<"--max-model-len">, tftypes.String<"512">>`,
		"env":        "{VLLM_USE_RAY_V2_EXECUTOR_BACKEND=1}", "endpoint": "http://127.0.0.1:8000/v1", "status": "serving",
		"process_identity": show(t, created.Value, "process_identity"), "executor": "RayExecutorV2", "vllm_version": sim.VLLMVersion,
	})
	p := l.mustPlan(deploymentType, d.config(l), st)
	expectValues(t, "the plan after the import", p.Planned, map[string]string{
		"process_identity": show(t, created.Value, "process_identity")})

	for _, tc := range []struct {
		name, id string
		want     diagnostic
	}{
		{"no port", l.host(0), diagnostic{summary: "Invalid import ID", detail: []string{`want <head ssh_host>:<port>`}}},
		{"no host", ":8000", diagnostic{summary: "Invalid import ID"}},
		{"nothing on the port", l.host(0) + ":8001", diagnostic{summary: "Cannot import the vLLM deployment",
			detail: []string{"nothing listens on port 8001"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.terraform().Import(ctx, deploymentType, tc.id)
			expectDiagnostic(t, stepDiagnostics(t, err), tc.want)
		})
	}
}

// The key in api_key_file on the head: the server reads it at launch, and
// the readiness gate presents it. An empty one is refused at launch, which
// then leaves nothing running.
func TestSimVLLMDeployment_apiKeyFile(t *testing.T) {
	l := withCluster(t)
	l.model.WriteFile(0, "/home/sim/vllm.key", "sk-file\n")
	_, st := l.converge(deploymentType, simDeploy{extra: map[string]any{"api_key_file": "/home/sim/vllm.key"}}.config(l), sim.State{})
	if _, _, env, ok := l.model.VLLM(0, 8000); !ok || env["VLLM_API_KEY"] != "sk-file" {
		t.Errorf("the server's key: %v %q", ok, env["VLLM_API_KEY"])
	}
	expectValues(t, "the state", st.Value, map[string]string{"api_key_file": "/home/sim/vllm.key", "status": "serving"})

	l2 := withCluster(t)
	l2.model.WriteFile(0, "/home/sim/empty.key", " \n")
	p := l2.mustPlan(deploymentType, simDeploy{extra: map[string]any{"api_key_file": "/home/sim/empty.key"}}.config(l2), sim.State{})
	_, err := l2.apply(p)
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "Cannot launch vllm serve",
		detail: []string{"api_key_file /home/sim/empty.key is empty or unreadable: vLLM would serve without authentication"}})
	if _, _, _, ok := l2.model.VLLM(0, 8000); ok {
		t.Error("a launch refused left vllm serve running")
	}
}

// A head that cannot be reached fails the refresh on head.ssh_host, and
// the error says how to forget a node gone for good (a destroy refreshes
// first, so it is the destroy's error too).
func TestSimVLLMDeployment_headUnreachable(t *testing.T) {
	l := withCluster(t)
	d := simDeploy{}
	_, st := l.converge(deploymentType, d.config(l), sim.State{})
	// The state's head moves to a port where nothing listens.
	moved, err := tftypes.Transform(st.Value, func(p *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if p.Equal(attr("head", "ssh_port")) {
			return tftypes.NewValue(tftypes.Number, 1), nil
		}
		return v, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st.Value = moved
	_, err = l.plan(deploymentType, d.config(l), st)
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "Cannot reach the head", attr: attr("head", "ssh_host"),
		detail: []string{"terraform state rm <address>"}})
	if _, _, _, ok := l.model.VLLM(0, 8000); !ok {
		t.Error("the failed refresh stopped the server")
	}
}

// Another apply (the same SSH user, another state or workspace) is
// launching vllm serve on this head and port, its model still loading: a
// plan that would launch there is refused, naming that apply, and the
// loading server is left alone. Once it has answered, the port is simply
// held by a serving server (D17), no longer "launching".
func TestSimVLLMDeployment_anotherApplyLaunching(t *testing.T) {
	l := withCluster(t)
	d := simDeploy{}
	l.converge(deploymentType, d.config(l), sim.State{}) // the other state's server
	loading, _, _, _ := l.model.VLLM(0, 8000)
	l.model.LaunchUnderWay(0, 8000, "terraform-provider-spark pid 77 on laptop-b")
	_, err := l.plan(deploymentType, d.config(l), sim.State{})
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "Another apply is launching vllm serve on this port", attr: attr("port"),
		detail: []string{"pid 77 on laptop-b", "Wait for that apply to finish"}})
	if now, _, _, ok := l.model.VLLM(0, 8000); !ok || now != loading {
		t.Fatalf("the loading server was touched: %q, then %q (running: %v)", loading, now, ok)
	}
	l.model.LaunchDone(0, 8000)
	_, err = l.plan(deploymentType, d.config(l), sim.State{})
	for _, diag := range stepDiagnostics(t, err) {
		if diag.Summary == "Another apply is launching vllm serve on this port" {
			t.Errorf("a launch that answered is still refused as under way: %s", diag.Detail)
		}
	}
}

// A server too busy to answer /health in time (10 s) is kept: the refresh
// warns, names the way to restart it, and the plan changes nothing (a
// restart would throw away production load and a model's load time).
func TestSimVLLMDeployment_busyServerIsKept(t *testing.T) {
	l := withCluster(t)
	d := simDeploy{}
	_, st := l.converge(deploymentType, d.config(l), sim.State{})
	identity, _, _, _ := l.model.VLLM(0, 8000)
	if err := l.model.SetVLLMHealth(0, 8000, sim.HealthLate); err != nil {
		t.Fatal(err)
	}
	p := l.mustPlan(deploymentType, d.config(l), st)
	expectDiagnostic(t, p.RefreshDiagnostics, diagnostic{severity: warning, summary: "vLLM answered /health late",
		detail: []string{"did not answer /health within 10 s", "apply -replace=<address>"}})
	if ch := p.Changes(); ch != "" {
		t.Errorf("the plan of a busy server changes:\n%s", ch)
	}
	if now, _, _, ok := l.model.VLLM(0, 8000); !ok || now != identity {
		t.Errorf("the busy server was touched: %s, then %s", identity, now)
	}
}
