package resources_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/lab-infra/terraform-provider-spark/internal/sim"
)

// The placement rules run at plan, on the head and on Ray's live table,
// and refuse (or warn of) what would hang or fail vLLM, naming the
// attribute and the rule.
func TestSimVLLMDeployment_planFindings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nodes  func(*sim.Model)
		deploy simDeploy
		want   []diagnostic
	}{{
		name:   "host_ip Ray did not register, on a vLLM that pins nothing",
		deploy: simDeploy{extra: map[string]any{"host_ip": fabricIP(1), "api_key_wo": "k"}},
		want: []diagnostic{{severity: warning, rule: "D1", attr: attr("host_ip"),
			summary: "VLLM_HOST_IP is not the address Ray registered for the head (this vLLM serves anyway)",
			detail:  []string{"VLLM_HOST_IP = 10.20.0.2 (from host_ip), but Ray registered the head as node:10.20.0.1"}}},
	}, {
		name: "host_ip Ray did not register, on the legacy executor",
		deploy: simDeploy{extra: map[string]any{"host_ip": fabricIP(1), "api_key_wo": "k",
			"env": map[string]any{"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "0"}}},
		want: []diagnostic{{rule: "D1", attr: attr("host_ip"),
			summary: "vLLM placement address does not match the address Ray registered for the head",
			detail:  []string{"node:10.20.0.2 belongs to a worker, not to the head", `host_ip = "10.20.0.1"`}}},
	}, {
		name:   "more GPUs than the cluster has",
		deploy: simDeploy{extra: map[string]any{"tensor_parallel_size": 4, "api_key_wo": "k"}},
		want: []diagnostic{{rule: "D8", attr: attr("tensor_parallel_size"), summary: "The parallel sizes exceed the cluster's GPUs",
			detail: []string{"tensor_parallel_size 4 x pipeline_parallel_size 1 = 4 GPUs, but the alive nodes Ray registered have 2"}}},
	}, {
		name:   "the port held by another program",
		nodes:  func(m *sim.Model) { m.HoldPort(0, 8000, "nginx") },
		deploy: simDeploy{extra: map[string]any{"api_key_wo": "k"}},
		want: []diagnostic{{rule: "D17", attr: attr("port"), summary: "vLLM port is already in use on the head",
			detail: []string{"port = 8000 is held on the head (127.1.0.1) by nginx"}}},
	}, {
		name:   "no Ray at ray_address",
		deploy: simDeploy{rayAddress: fabricIP(0) + ":6390", extra: map[string]any{"api_key_wo": "k"}},
		want: []diagnostic{{rule: "D21", attr: attr("ray_address"), summary: "No Ray answers at ray_address",
			detail: []string{`ray_address = "10.20.0.1:6390", but nothing answers there`}}},
	}, {
		name:   "ray_address of a cluster whose head is another node",
		nodes:  func(m *sim.Model) { _ = m.StartRay(1, "--head", "--port", "6379") },
		deploy: simDeploy{rayAddress: fabricIP(1) + ":6379", extra: map[string]any{"api_key_wo": "k"}},
		want: []diagnostic{
			{rule: "D21", attr: attr("ray_address"), summary: "ray_address is a Ray whose head is another node",
				detail: []string{"that Ray's head is node:10.20.0.2 (spark-001)", "its addresses: 10.20.0.1 on enP7s7"}},
			{rule: "D11", attr: attr("runtime"), summary: "vllm serve would run outside the head's Ray",
				detail: []string{`where Ray records the cluster "10.20.0.1:6379"; ray_address is "10.20.0.2:6379"`}},
		},
	}, {
		name:   "an executor variable vLLM cannot read",
		deploy: simDeploy{extra: map[string]any{"api_key_wo": "k", "env": map[string]any{"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "yes"}}},
		want: []diagnostic{{rule: "D18", attr: attr("env"), summary: "Invalid VLLM_USE_RAY_V2_EXECUTOR_BACKEND",
			detail: []string{`= "yes" (from env) is not an integer`}}},
	}, {
		name:   "the GCS port as vLLM's",
		deploy: simDeploy{extra: map[string]any{"api_key_wo": "k", "port": 6379}},
		want:   []diagnostic{{attr: attr("port"), summary: "vLLM port is the Ray head's GCS port"}},
	}, {
		name:   "every address without a key",
		deploy: simDeploy{},
		want: []diagnostic{{severity: warning, attr: attr("host"), summary: "vLLM listens on every address of the head without an API key",
			detail: []string{`host = "0.0.0.0" and no api_key_wo or api_key_file`}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			l := withCluster(t)
			if tc.nodes != nil {
				tc.nodes(l.model)
			}
			p, err := l.plan(deploymentType, tc.deploy.config(l), sim.State{})
			ds := p.Diagnostics
			if err != nil {
				ds = stepDiagnostics(t, err)
			}
			for _, w := range tc.want {
				expectDiagnostic(t, ds, w)
			}
			if len(ds) != len(tc.want) {
				t.Errorf("%d diagnostics, want %d:\n%s", len(ds), len(tc.want), listDiagnostics(ds))
			}
			// A destroy refreshes first and plans this deployment too,
			// though it was never created: every error of the plan says how
			// to get by. (An invalid configuration is refused at validate,
			// which a destroy runs too: no flag gets past it.)
			var se *sim.StepError
			if errors.As(err, &se) && strings.HasPrefix(se.Step, "validate ") {
				return
			}
			for _, d := range ds {
				if d.Severity == tfprotov6.DiagnosticSeverityError && !strings.Contains(d.Detail, "destroy -refresh=false") {
					t.Errorf("the error %q lacks the destroy hint:\n%s", d.Summary, d.Detail)
				}
			}
		})
	}
}

// A deployment planned with the cluster it joins, whose head address is
// not known before the cluster is created: the placement is concluded at
// apply, planned as unknown.
func TestSimVLLMDeployment_placementUnknownWithTheCluster(t *testing.T) {
	l := newSimLab(t, 1)
	p := l.mustPlan(deploymentType, simDeploy{rayAddress: sim.Unknown(tftypes.String),
		extra: map[string]any{"api_key_wo": "k"}}.config(l), sim.State{})
	expectValues(t, "the plan", p.Planned, map[string]string{
		"placement_ip": "<unknown>", "vllm_version": "<unknown>", "executor": "<unknown>", "placement_pinned": "<unknown>",
		"process_identity": "<unknown>", "status": "serving", "id": l.host(0) + ":8000"})
	noDiagnostics(t, "the plan", p.Diagnostics)
}

// A finding on a serving deployment that the plan does not restart is a
// warning, and the plan keeps what the last plan concluded; a plan that
// restarts it refuses it.
func TestSimVLLMDeployment_findingOnAServingDeploymentWarns(t *testing.T) {
	l := withCluster(t)
	d := simDeploy{extra: map[string]any{"api_key_wo": "k", "tensor_parallel_size": 2}}
	_, st := l.converge(deploymentType, d.config(l), sim.State{})

	if err := l.model.KillRaylet(1); err != nil { // the worker's GPU leaves Ray
		t.Fatal(err)
	}
	p := l.mustPlan(deploymentType, d.config(l), st)
	if ch := p.Changes(); ch != "" {
		t.Errorf("the plan of a serving deployment changes:\n%s", ch)
	}
	expectDiagnostic(t, p.Diagnostics, diagnostic{severity: warning, rule: "D8", attr: attr("tensor_parallel_size"),
		summary: "The parallel sizes exceed the cluster's GPUs",
		detail:  []string{"Nothing is started or restarted by this plan", "the alive nodes Ray registered have 1"}})

	d.extra["served_model_name"] = "tiny"
	_, err := l.plan(deploymentType, d.config(l), st)
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{rule: "D8", attr: attr("tensor_parallel_size"),
		summary: "The parallel sizes exceed the cluster's GPUs"})
}
