package resources_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

// TestAccRayCluster_attributeChanges: the cluster-level rows of the
// attribute-change table (attribute_changes_test.go) that only a lab shows,
// each change applied and then looked for on the nodes: removing a
// worker's labels and resources restarts that worker only, and Ray there
// registers none; a second SSH user on a worker makes Ray run there as that
// user (and back); a pinned host key restarts nothing; head labels set and
// then removed replace the cluster both ways.
func TestAccRayCluster_attributeChanges(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	workers := map[string]string{w.Name: ""}
	base := rayCluster{workers: workers}.config(l)
	custom := rayCluster{workers: workers, workerLines: []string{`labels    = { rack = "r1" }`, `resources = { "spark.w" = 1 }`}}.config(l)
	hostKey := rayCluster{workers: workers, workerLines: []string{fmt.Sprintf("host_key  = %q", w.HostKey)}}.config(l)
	secondUser := rayCluster{workers: workers, workerLines: []string{fmt.Sprintf("ssh_user  = %q", l.SecondSSHUser)}}.config(l)
	headLabelled := rayCluster{workers: workers, headLines: []string{`labels   = { role = "head" }`}}.config(l)
	workerPath := func(attr string) tfjsonpath.Path { return tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey(attr) }
	raylet := func(n lab.Node) string { return acctest.RunningOrFail(t, n, acctest.RayletUser) }
	var headBefore, workerBefore string
	note := func() { headBefore, workerBefore = raylet(head), raylet(w) }
	// expect checks each node's raylet against the one noted before the step.
	expect := func(headRestarts, workerRestarts bool, workerUser string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			h, wk := raylet(head), raylet(w)
			if (h != headBefore) != headRestarts {
				return fmt.Errorf("head raylet %q -> %q: restarted = %v, want %v", headBefore, h, h != headBefore, headRestarts)
			}
			if (wk != workerBefore) != workerRestarts {
				return fmt.Errorf("worker raylet %q -> %q: restarted = %v, want %v", workerBefore, wk, wk != workerBefore, workerRestarts)
			}
			if f := strings.Fields(wk); len(f) != 2 || f[1] != workerUser {
				return fmt.Errorf("worker raylet %q, want one run by %s", wk, workerUser)
			}
			return nil
		}
	}
	t.Cleanup(func() {
		// The second user's Ray, if a failed step left it.
		_, _ = lab.ExecAs(context.Background(), w, l.SecondSSHUser, "sh", "-c", head.RayCommand+" stop --force >/dev/null 2>&1; rm -f \"$HOME/.ray/auth_token\"")
	})
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{Config: custom},
			{
				PreConfig: note,
				Config:    base, // labels and resources removed (a value to null)
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(clusterAddr, workerPath("labels"), knownvalue.MapExact(map[string]knownvalue.Check{})),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, workerPath("resources"), knownvalue.MapExact(map[string]knownvalue.Check{})),
				},
				Check: expect(false, true, l.SSHUser),
			},
			{
				PreConfig: note,
				Config:    hostKey, // null to a value: checks the node, restarts nothing
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionUpdate),
				}},
				Check: expect(false, false, l.SSHUser),
			},
			{
				PreConfig: note,
				Config:    secondUser, // null to a value: Ray there runs as that user
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionUpdate),
				}},
				Check: expect(false, true, l.SecondSSHUser),
			},
			{
				PreConfig: note,
				Config:    base, // and back (a value to null)
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeTestCheckFunc(expect(false, true, l.SSHUser), func(*terraform.State) error {
					// The provider's token left with the second user's Ray.
					out, err := lab.ExecAs(context.Background(), w, l.SecondSSHUser, "sh", "-c", `ls "$HOME/.ray/auth_token" 2>/dev/null || true`)
					if err != nil || strings.TrimSpace(out) != "" {
						return fmt.Errorf("the second user's Ray token stayed on %s: %q %w", w.Name, out, err)
					}
					return nil
				}),
			},
			{
				PreConfig: note,
				Config:    headLabelled, // null to a value on the head
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionReplace),
				}},
				Check: expect(true, true, l.SSHUser),
			},
			{
				PreConfig: note,
				Config:    base, // and removed: Ray's head runs without it
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionReplace),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head").AtMapKey("labels"), knownvalue.MapExact(map[string]knownvalue.Check{})),
				},
				Check: expect(true, true, l.SSHUser),
			},
			{Config: base, PlanOnly: true}, // and settled: the next plan is empty
		},
	})
}
