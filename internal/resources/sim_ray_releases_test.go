package resources_test

import (
	"context"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/sim"
)

// A cluster on Ray 2.35.0, whose GCS numbers placement-group states as
// releases before 2.36.0 do (CREATED 1, REMOVED 2: 2.36.0 inserted
// PREPARED = 1). The plan reads the states by the head's release: a
// group that holds the cluster's GPUs is refused as held (D8), and a
// group Ray removed, which the GCS keeps in its table, holds nothing.
// Read with 2.36's numbering, the first plans clean (vLLM then waits for
// a placement group it cannot get) and the second is a false D8.
func TestSimVLLMDeployment_placementGroupsOfAnOlderRay(t *testing.T) {
	const old = "2.35.0"
	l := newSimLab(t, 2)
	for i := range 2 {
		l.model.SetRayVersion(i, old)
	}
	// Token authentication came after 2.35 (D16): this cluster runs without.
	l.converge(clusterType, simCluster{workers: map[string]int{"w1": 1}, extra: map[string]any{"auth_mode": "disabled"}}.config(l), sim.State{})

	first := simDeploy{extra: map[string]any{"tensor_parallel_size": 2}}
	_, st := l.converge(deploymentType, first.config(l), sim.State{})
	second := simDeploy{extra: map[string]any{"port": 8001}}

	_, err := l.plan(deploymentType, second.config(l), sim.State{})
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{rule: "D8", attr: attr("tensor_parallel_size"),
		summary: "Not enough free GPUs: other deployments hold them"})

	if err := l.terraform().Destroy(context.Background(), deploymentType, first.config(l), st); err != nil {
		t.Fatal(err)
	}
	p := l.mustPlan(deploymentType, second.config(l), sim.State{})
	for _, d := range p.Diagnostics {
		if d.Summary == "Not enough free GPUs: other deployments hold them" {
			t.Errorf("a removed placement group, kept in the GCS's table, counted as holding GPUs: %s", d.Detail)
		}
	}
}
