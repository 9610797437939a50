package resources_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

// The fabric probe on the lab's fabric, as the ordinary SSH user:
//   - a floor above what the link carries is refused at plan (D33), a
//     plan-only step after which nothing runs on the nodes;
//   - with a floor it clears, the cluster applies and fabric_gbps holds
//     the measured figure; the next plan measures again and is empty;
//   - the head's fabric port shaped to 50 Mb/s (tc), the running cluster's
//     plan fails on the degraded link: a fault now, which a scheduled
//     `plan -detailed-exitcode` sees; with the shaping gone it is clean.
func TestAccRayCluster_fabricProbe(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	probe := func(floor string) string {
		return rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: w.FabricIP},
			extra: []string{fmt.Sprintf("fabric_probe = { min_gbps = %s }", floor)}}.config(l)
	}
	port, err := lab.FabricInterface(context.Background(), head)
	if err != nil {
		t.Fatal(err)
	}
	unshape := func() {
		_, _ = lab.Exec(context.Background(), head, "sh", "-c", "tc qdisc del dev "+port+" root 2>/dev/null; true")
	}
	t.Cleanup(unshape)
	r := newRefusals(t, l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: append(r.steps(resource.TestStep{
			Config:      probe("100000"),
			ExpectError: regexp.MustCompile(`(?s)The fabric carries less than its floor.*head -> ` + w.Name + ` over ` + regexp.QuoteMeta(head.FabricIP) + ` -> ` + regexp.QuoteMeta(w.FabricIP) + `.*min_gbps = 100000.*Rule D33`),
		}), r.done(),
			resource.TestStep{
				Config: probe("0.5"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("fabric_gbps").AtMapKey(w.Name), knownvalue.Float64Func(func(v float64) error {
						if v < 0.5 {
							return fmt.Errorf("%.1f Gb/s measured, under the floor the plan let through", v)
						}
						return nil
					})),
				},
			},
			resource.TestStep{Config: probe("0.5"), ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
			resource.TestStep{
				PreConfig: func() {
					acctest.OnNode(t, head, "shape the fabric port", "tc qdisc add dev "+port+" root tbf rate 50mbit burst 32kbit latency 400ms")
				},
				Config:      probe("0.5"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)The fabric carries less than its floor.*carried 0\.[01] Gb/s.*Rule D33`),
			},
			resource.TestStep{
				PreConfig:        unshape,
				Config:           probe("0.5"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		),
	})
}
