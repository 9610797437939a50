package resources_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
)

// hcl is v as an HCL expression: HCL's object constructor takes JSON's
// syntax ({"k": v}), and its strings JSON's escapes.
func hcl(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The TestSim* tests drive the provider through an in-process stand-in for
// Terraform (sim.Terraform). This holds it against the real CLI on the same
// scenario and the same simulated nodes: what the stand-in plans for a new
// cluster is what Terraform (or OpenTofu) plans and then keeps in state; the
// next plan changes nothing; destroy leaves no Ray on the nodes. No lab: the
// nodes are the simulated ones, in this process.
func TestAccSim_inProcessTerraformAgreesWithTheCLI(t *testing.T) {
	l := newSimLab(t, 2)
	c := simCluster{workers: map[string]int{"w1": 1}}
	cfg := c.config(l)
	gcs := fabricIP(0) + ":6379"

	// The stand-in's plan, before anything runs.
	p, err := l.terraform().PlanNew(context.Background(), clusterType, cfg)
	if err != nil {
		t.Fatal(err)
	}
	compared := [][]string{{"id"}, {"head_address"}, {"ray_version"}, {"gcs_port"}, {"auth_mode"}, {"dashboard_host"},
		{"head", "registered_ip"}, {"head", "alive"}, {"workers", "w1", "registered_ip"}, {"workers", "w1", "alive"}}
	var planChecks []plancheck.PlanCheck
	var stateChecks []statecheck.StateCheck
	for _, steps := range compared {
		want := show(t, p.Planned, steps...)
		jp := tfjsonpath.New(steps[0])
		for _, s := range steps[1:] {
			jp = jp.AtMapKey(s)
		}
		var kv knownvalue.Check = knownvalue.StringExact(want)
		switch want {
		case "true":
			kv = knownvalue.Bool(true)
		case "6379":
			kv = knownvalue.Int64Exact(6379)
		}
		planChecks = append(planChecks, plancheck.ExpectKnownValue("spark_ray_cluster.c", jp, kv))
		stateChecks = append(stateChecks, statecheck.ExpectKnownValue("spark_ray_cluster.c", jp, kv))
	}
	if got := show(t, p.Planned, "head_address"); got != gcs {
		t.Fatalf("the stand-in plans head_address %s, want %s", got, gcs)
	}
	planChecks = append(planChecks, plancheck.ExpectUnknownValue("spark_ray_cluster.c", tfjsonpath.New("head").AtMapKey("node_id")))

	config := fmt.Sprintf(`
provider "spark" {
  ssh = %s
}

resource "spark_ray_cluster" "c" {
  head    = %s
  workers = %s
}
`, hcl(t, l.provider["ssh"]), hcl(t, cfg["head"]), hcl(t, cfg["workers"]))

	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(*terraform.State) error {
			for i := range 2 {
				if l.model.Running(i, gcs) {
					return fmt.Errorf("Ray still runs on simulated node %d after destroy", i)
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:            config,
				ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: append(planChecks, plancheck.ExpectResourceAction("spark_ray_cluster.c", plancheck.ResourceActionCreate))},
				ConfigStateChecks: stateChecks,
				Check: func(*terraform.State) error {
					if !l.model.Running(0, gcs) || !l.model.Running(1, gcs) {
						return fmt.Errorf("Ray does not run on both simulated nodes after the apply")
					}
					return nil
				},
			},
			{
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}
