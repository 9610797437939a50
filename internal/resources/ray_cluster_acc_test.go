package resources_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

const clusterAddr = "spark_ray_cluster.lab"

// rayCluster is the spark_ray_cluster "lab" on the lab: its head on the first
// node, Ray on the host (the head's ray_command), one GPU a node.
type rayCluster struct {
	provider    acctest.Provider  // the provider block before the cluster
	headIP      string            // head.node_ip; "" leaves it unset (Ray detects)
	noHeadGPU   bool              // head.num_gpus = 0: the head offers Ray no GPU
	headLines   []string          // more attribute lines in head
	workers     map[string]string // lab node name -> its node_ip ("" leaves it unset)
	workerLines []string          // more attribute lines in every worker
	rayCommand  string            // the host runtime's ray_command; "" is the head's
	runtime     string            // the runtime's value instead of the host runtime
	extra       []string          // more attribute lines of the cluster
}

// rackLabel is a worker label: a change that restarts Ray on that worker,
// and only there.
const rackLabel = `labels   = { rack = "r2" }`

// config renders the provider block and the cluster. Workers are written
// in the lab's node order.
func (c rayCluster) config(l *lab.File) string {
	head := l.Nodes[0]
	var b strings.Builder
	b.WriteString(c.provider.Config(l))
	gpus := 1
	if c.noHeadGPU {
		gpus = 0
	}
	fmt.Fprintf(&b, "resource \"spark_ray_cluster\" \"lab\" {\n  head = {\n    ssh_host = %q\n    num_gpus = %d\n", head.SSHHost, gpus)
	writeLines(&b, "    ", c.headLines)
	if c.headIP != "" {
		fmt.Fprintf(&b, "    node_ip  = %q\n", c.headIP)
	}
	b.WriteString("  }\n")
	if len(c.workers) > 0 {
		b.WriteString("  workers = {\n")
		for _, n := range l.Nodes[1:] {
			ip, ok := c.workers[n.Name]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "    %s = {\n      ssh_host = %q\n      num_gpus = 1\n", n.Name, n.SSHHost)
			writeLines(&b, "      ", c.workerLines)
			if ip != "" {
				fmt.Fprintf(&b, "      node_ip  = %q\n", ip)
			}
			b.WriteString("    }\n")
		}
		b.WriteString("  }\n")
	}
	fmt.Fprintf(&b, "  runtime = %s\n", c.runtimeValue(head))
	writeLines(&b, "  ", c.extra)
	b.WriteString("}\n")
	return b.String()
}

func (c rayCluster) runtimeValue(head lab.Node) string {
	if c.runtime != "" {
		return c.runtime
	}
	cmd := c.rayCommand
	if cmd == "" {
		cmd = head.RayCommand
	}
	return fmt.Sprintf("{ host = { ray_command = %q } }", cmd)
}

// writeLines writes each line on its own, indented.
func writeLines(b *strings.Builder, indent string, lines []string) {
	for _, line := range lines {
		b.WriteString(indent + line + "\n")
	}
}

// noRayLeft is the CheckDestroy: no raylet or gcs_server on any lab node,
// looked up on the nodes themselves.
func noRayLeft(l *lab.File) func(*terraform.State) error {
	return func(*terraform.State) error {
		for _, n := range l.Nodes {
			if err := rayGone(l, n, "after destroy"); err != nil {
				return err
			}
		}
		return nil
	}
}

// rayGone checks a node after a destroy or a rollback (when says which):
// no Ray daemon, no unfinished ray start that would start one, and no auth
// token the provider wrote (a secret: it goes with the cluster).
func rayGone(l *lab.File, n lab.Node, when string) error {
	out, err := acctest.Running(n, acctest.RayDaemons, acctest.RayStart)
	if err != nil {
		return err
	}
	if out != "" {
		return fmt.Errorf("Ray still running on %s %s:\n%s", n.Name, when, out)
	}
	tok, err := lab.ExecAs(context.Background(), n, l.SSHUser, "sh", "-c", `ls "$HOME/.ray/auth_token"* 2>/dev/null; true`)
	if err != nil {
		return err
	}
	if strings.TrimSpace(tok) != "" {
		return fmt.Errorf("Ray's auth token left on %s %s: %s", n.Name, when, tok)
	}
	return nil
}

func registered(path ...any) tfjsonpath.Path {
	p := tfjsonpath.New(path[0].(string))
	for _, s := range path[1:] {
		switch v := s.(type) {
		case string:
			p = p.AtMapKey(v)
		case int:
			p = p.AtSliceIndex(v)
		}
	}
	return p
}

// The field report's topology, fixed: head and worker on the fabric. The
// plan knows every registered IP before anything starts; workers can come
// and go without the head restarting; the cluster imports.
func TestAccRayCluster_fabricLifecycle(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	withWorker := rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}}.config(l)
	headOnly := rayCluster{headIP: head.FabricIP}.config(l)
	headID := statecheck.CompareValue(compare.ValuesSame())
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{
				Config: withWorker,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionCreate),
					// Known at plan, not "(known after apply)": the worker's is Ray's own detection (route to the head).
					plancheck.ExpectKnownValue(clusterAddr, registered("head", "registered_ip"), knownvalue.StringExact(head.FabricIP)),
					plancheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("registered_ip"), knownvalue.StringExact(w.FabricIP)),
					plancheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head_address"), knownvalue.StringExact(head.FabricIP+":6379")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head").AtMapKey("registered_ip"), knownvalue.StringExact(head.FabricIP)),
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head").AtMapKey("alive"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("registered_ip"), knownvalue.StringExact(w.FabricIP)),
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("ray_version"), knownvalue.StringExact(l.RayVersion)),
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head").AtMapKey("num_gpus"), knownvalue.Int64Exact(1)),
					headID.AddStateValue(clusterAddr, tfjsonpath.New("head").AtMapKey("node_id")),
				},
				// vLLM's worker actors read VLLM_HOST_IP from their raylet's environment:
				// each node's must be the address Ray registered there (D10). Token
				// auth is on, with one token in a 0600 file on every node, never in state.
				Check: func(s *terraform.State) error {
					var tokens []string
					for _, n := range []lab.Node{head, w} {
						out, err := lab.Exec(context.Background(), n, "sh", "-c",
							`tr '\0' '\n' < /proc/$(pgrep -xo raylet)/environ | grep -E '^(VLLM_HOST_IP|RAY_AUTH_MODE)=' | sort`)
						if err != nil || strings.TrimSpace(out) != "RAY_AUTH_MODE=token\nVLLM_HOST_IP="+n.FabricIP {
							return fmt.Errorf("raylet on %s has %q (%w), want RAY_AUTH_MODE=token and VLLM_HOST_IP=%s", n.Name, out, err, n.FabricIP)
						}
						tok, err := lab.ExecAs(context.Background(), n, l.SSHUser, "sh", "-c", `stat -c %a ~/.ray/auth_token && cat ~/.ray/auth_token`)
						lines := strings.Split(strings.TrimSpace(tok), "\n")
						if err != nil || len(lines) != 2 || lines[0] != "600" || len(lines[1]) < 32 {
							return fmt.Errorf("auth token on %s: %q %w", n.Name, tok, err)
						}
						tokens = append(tokens, lines[1])
					}
					if tokens[0] != tokens[1] {
						return fmt.Errorf("head and worker hold different auth tokens")
					}
					if err := acctest.SecretInState(s, tokens[0]); err != nil {
						return fmt.Errorf("the Ray auth token: %w", err)
					}
					return nil
				},
			},
			{
				ResourceName:                         clusterAddr,
				ImportState:                          true,
				ImportStateId:                        head.SSHHost + "," + w.Name + "=" + w.SSHHost,
				ImportStateVerify:                    true,
				ImportStateVerifyIdentifierAttribute: "id",
				// Not observable from Ray: where its command lives, and whether
				// the address it registered was given or detected.
				ImportStateVerifyIgnore: []string{"runtime", "timeouts", "head.node_ip"},
			},
			{
				// The same with an import block: the plan adopts the running
				// cluster in place, restarting nothing.
				ResourceName:       clusterAddr,
				ImportState:        true,
				ImportStateKind:    resource.ImportBlockWithID,
				ImportStateId:      head.SSHHost + "," + w.Name + "=" + w.SSHHost,
				ExpectNonEmptyPlan: true,
				ImportPlanChecks: resource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
					acctest.ExpectAdoptedInPlace(clusterAddr),
				}},
			},
			{
				// Remove the worker: Ray stops there only; the head keeps its node_id.
				Config: headOnly,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					headID.AddStateValue(clusterAddr, tfjsonpath.New("head").AtMapKey("node_id")),
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers"), knownvalue.Null()),
				},
				Check: func(*terraform.State) error {
					out, err := acctest.Running(w, acctest.RayDaemons)
					if err != nil || out != "" {
						return fmt.Errorf("Ray still on the removed worker %s: %q %w", w.Name, out, err)
					}
					return nil
				},
			},
			{
				// Add it back: joins the running head.
				Config: withWorker,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					headID.AddStateValue(clusterAddr, tfjsonpath.New("head").AtMapKey("node_id")),
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
				},
			},
			{
				// Drift: the worker's raylet dies. The plan names it; apply heals it.
				PreConfig: func() { killRaylet(t, l, w) },
				Config:    withWorker,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectNonEmptyPlan(),
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
				}, PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				ConfigStateChecks: []statecheck.StateCheck{
					headID.AddStateValue(clusterAddr, tfjsonpath.New("head").AtMapKey("node_id")),
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
				},
			},
			{
				// Drift: the head's box restarts. The cluster is gone: plan re-creates it.
				PreConfig: func() {
					if err := lab.Restart(context.Background(), head); err != nil {
						t.Fatal(err)
					}
				},
				Config: withWorker,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionCreate),
				}, PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
				},
			},
			{
				// env set on a cluster that had none takes effect: the cluster
				// is replaced and every raylet has it (it used to change state
				// only, and the next plan was empty).
				Config: rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}, extra: []string{`env = { SPARK_ACC_ENV = "v1" }`}}.config(l),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionDestroyBeforeCreate),
				}, PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check: func(*terraform.State) error {
					for _, n := range []lab.Node{head, w} { // the cluster's nodes: a lab may have more
						out, err := lab.Exec(context.Background(), n, "sh", "-c", `tr '\0' '\n' < /proc/$(pgrep -xo raylet)/environ | grep '^SPARK_ACC_ENV='`)
						if err != nil || strings.TrimSpace(out) != "SPARK_ACC_ENV=v1" {
							return fmt.Errorf("raylet on %s lacks the env added to the cluster: %q %w", n.Name, out, err)
						}
					}
					return nil
				},
			},
		},
	})
}

// The field report's head: no node_ip. The plan says, before anything
// starts, that Ray will register the external address; the worker then
// joins over the external network too.
func TestAccRayCluster_autoDetectRegistersExternal(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{{
			// spark_ray_nodes: the diagnosis the field report needed, as a data source.
			// Without token auth, as an operator can choose knowingly.
			Config: rayCluster{workers: map[string]string{w.Name: ""}, extra: []string{`auth_mode = "disabled"`}}.config(l) + `
data "spark_ray_nodes" "lab" {
  ssh_host    = spark_ray_cluster.lab.head.ssh_host
  ray_address = spark_ray_cluster.lab.head_address
}
`,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(clusterAddr, registered("head", "registered_ip"), knownvalue.StringExact(head.ExternalIP)),
				plancheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("registered_ip"), knownvalue.StringExact(w.ExternalIP)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head").AtMapKey("registered_ip"), knownvalue.StringExact(head.ExternalIP)),
				statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("registered_ip"), knownvalue.StringExact(w.ExternalIP)),
				statecheck.ExpectKnownValue("data.spark_ray_nodes.lab", tfjsonpath.New("nodes"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"registered_ip": knownvalue.StringExact(head.ExternalIP), "is_head": knownvalue.Bool(true),
						"alive": knownvalue.Bool(true), "hostname": knownvalue.StringExact(head.Name),
						"resources": knownvalue.MapPartial(map[string]knownvalue.Check{
							"GPU": knownvalue.Float64Exact(1), "node:" + head.ExternalIP: knownvalue.Float64Exact(1)}),
					}),
					knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"registered_ip": knownvalue.StringExact(w.ExternalIP), "is_head": knownvalue.Bool(false),
						"alive": knownvalue.Bool(true), "hostname": knownvalue.StringExact(w.Name),
					}),
				})),
				statecheck.ExpectKnownValue("data.spark_ray_nodes.lab", tfjsonpath.New("ray_version"), knownvalue.StringExact(l.RayVersion)),
			},
		}},
	})
}
