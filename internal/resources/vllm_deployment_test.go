package resources_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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

const deployAddr = "spark_vllm_deployment.qwen"

// openTofu: the write-only api_key_wo needs a CLI that supports write-only
// attributes (OpenTofu 1.11+, Terraform 1.11+); Terraform 1.8.5 uses the
// api_key_file alternative, as an operator on an older CLI would.
func openTofu() bool { return os.Getenv("TF_ACC_PROVIDER_HOST") == "registry.opentofu.org" }

func deploymentConfig(l *lab.File, hostIP string, tp int, keyLine string) string {
	head := l.Nodes[0]
	host := "null"
	if hostIP != "" {
		host = fmt.Sprintf("%q", hostIP)
	}
	vars := ""
	if strings.Contains(keyLine, "var.vllm_api_key") {
		vars = "variable \"vllm_api_key\" {\n  type      = string\n  sensitive = true\n}\n"
	}
	return vars + fmt.Sprintf(`
resource "spark_vllm_deployment" "qwen" {
  head                 = { ssh_host = spark_ray_cluster.lab.head.ssh_host }
  runtime              = spark_ray_cluster.lab.runtime
  ray_address          = spark_ray_cluster.lab.head_address
  model                = "Qwen/Qwen3.5-122B-A10B-FP8"
  served_model_name    = "qwen3.5"
  tensor_parallel_size = %d
  host_ip              = %s
  vllm_command         = "/usr/local/bin/vllm"
  %s
  env                  = { VLLM_STANDIN_PLACEMENT_WAIT_S = "15" }
  timeouts             = { create = "3m", update = "3m" }
}
`, tp, host, keyLine) + fmt.Sprintf("\n# head %s\n", head.Name)
}

// keySetup puts a canary API key where the deployment reads it and returns
// the attribute line that passes it.
func keySetup(t *testing.T, head lab.Node, canary string) string {
	t.Helper()
	if openTofu() {
		// As an operator would: from a sensitive variable, never a literal.
		t.Setenv("TF_VAR_vllm_api_key", canary)
		return "api_key_wo = var.vllm_api_key\n  api_key_wo_version = 1"
	}
	if _, err := lab.Exec(context.Background(), head, "sh", "-c", `umask 077; printf '%s\n' "$1" > /etc/vllm-api-key`, "sh", canary); err != nil {
		t.Fatal(err)
	}
	return `api_key_file = "/etc/vllm-api-key"`
}

func chat(endpoint, key string) (int, string, error) {
	body, _ := json.Marshal(map[string]any{"model": "qwen3.5", "max_tokens": 4,
		"messages": []map[string]string{{"role": "user", "content": "hello"}}})
	req, _ := http.NewRequest(http.MethodPost, endpoint+"/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func noVLLMLeft(l *lab.File) func(*terraform.State) error {
	return func(s *terraform.State) error {
		for _, n := range l.Nodes {
			out, _ := lab.Exec(context.Background(), n, "sh", "-c", "pgrep -af '[v]llm serve'; ss -Hltn 'sport = :8000'; true")
			if strings.TrimSpace(out) != "" {
				return fmt.Errorf("vLLM still running or port 8000 open on %s after destroy:\n%s", n.Name, out)
			}
		}
		return noRayLeft(l)(s)
	}
}

// The field report, end to end: Ray auto-detects the head's external
// address; VLLM_HOST_IP names the fabric one. The plan refuses it with both
// addresses and both fixes; the fixed config serves a chat completion.
func TestAccVLLMDeployment_fieldReport(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	canary := "canary-key-" + fmt.Sprint(time.Now().UnixNano())
	logFile := filepath.Join(t.TempDir(), "trace.log")
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_LOG_PATH", logFile)
	keyLine := keySetup(t, head, canary)
	cluster := clusterConfig(l, "", map[string]string{w.Name: ""})
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: []resource.TestStep{
			{
				Config: cluster + deploymentConfig(l, head.FabricIP, 2, keyLine),
				ExpectError: regexp.MustCompile(`(?s)vLLM placement address does not match.*node:` + regexp.QuoteMeta(head.FabricIP) +
					`.*node:` + regexp.QuoteMeta(head.ExternalIP) + `.*host_ip = "` + regexp.QuoteMeta(head.ExternalIP) +
					`".*node_ip = "` + regexp.QuoteMeta(head.FabricIP) + `"`),
			},
			{
				Config: cluster + deploymentConfig(l, head.ExternalIP, 2, keyLine),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(deployAddr, plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("placement_ip"), knownvalue.StringExact(head.ExternalIP)),
					statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
					statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("endpoint"), knownvalue.StringExact("http://"+head.SSHHost+":8000/v1")),
				},
				Check: func(s *terraform.State) error {
					endpoint := s.RootModule().Resources[deployAddr].Primary.Attributes["endpoint"]
					code, body, err := chat(endpoint, canary)
					if err != nil || code != 200 || !strings.Contains(body, "chat.completion") {
						return fmt.Errorf("chat completion through %s: %d %s %w", endpoint, code, body, err)
					}
					if code, _, err := chat(endpoint, ""); err != nil || code != 401 {
						return fmt.Errorf("a request without the key got %d (%w), want 401", code, err)
					}
					for addr, r := range s.RootModule().Resources {
						for k, v := range r.Primary.Attributes {
							if strings.Contains(v, canary) {
								return fmt.Errorf("the API key is in the state: %s.%s", addr, k)
							}
						}
					}
					out, err := lab.Exec(context.Background(), head, "sh", "-c", `for p in $(pgrep -f '[v]llm serve'); do tr '\0' ' ' < /proc/$p/cmdline; done`)
					if err != nil || strings.Contains(out, canary) || !strings.Contains(out, "serve") {
						return fmt.Errorf("the API key is in vllm's argv, or vllm is not running: %q %w", out, err)
					}
					return nil
				},
			},
			{
				ResourceName:      deployAddr,
				ImportState:       true,
				ImportStateId:     head.SSHHost + ":8000",
				ImportStateVerify: true,
				// Not readable back from the server: how the key and settings were given.
				ImportStateVerifyIgnore: []string{"api_key_wo", "api_key_wo_version", "api_key_file", "env", "runtime", "timeouts"},
			},
			{
				// Drift: the server dies. The plan shows it; apply restarts it.
				PreConfig: func() {
					if _, err := lab.Exec(context.Background(), head, "pkill", "-9", "-f", "vllm serve"); err != nil {
						t.Fatal(err)
					}
				},
				Config: cluster + deploymentConfig(l, head.ExternalIP, 2, keyLine),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectNonEmptyPlan(),
					plancheck.ExpectResourceAction(deployAddr, plancheck.ResourceActionUpdate),
				}, PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				},
			},
			{
				// TP=3 on 2 GPUs: refused at plan, from Ray's live node table.
				Config:      cluster + deploymentConfig(l, head.ExternalIP, 3, keyLine),
				ExpectError: regexp.MustCompile(`(?s)exceeds the cluster's GPUs.*= 3 GPUs.*have 2`),
			},
		},
	})
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("no TF_LOG=trace log to search: %v", err)
	}
	if bytes.Contains(b, []byte(canary)) {
		i := bytes.Index(b, []byte(canary))
		lo, hi := max(0, i-600), min(len(b), i+200)
		t.Fatalf("the API key appears in the TF_LOG=trace log %s:\n%s", logFile, b[lo:hi])
	}
}

// The other fix: Ray registers the fabric address (node_ip), vLLM is told the same.
func TestAccVLLMDeployment_fabricEverywhere(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: []resource.TestStep{{
			Config: clusterConfig(l, head.FabricIP, map[string]string{w.Name: ""}) + deploymentConfig(l, head.FabricIP, 2, ""),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("placement_ip"), knownvalue.StringExact(head.FabricIP)),
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
			},
		}},
	})
}

// The container runtime, for real: Ray and the vLLM stand-in run in a
// container on each node (`docker run -d --network host`), started from the
// image the lab loaded into each node's own Docker engine.
func TestAccVLLMDeployment_containerRuntime(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	runtime := fmt.Sprintf(`runtime = { container = { image = %q, name = "ray-node", gpus = "", shm_size = "1g", ray_command = "/opt/ray/bin/ray" } }`, l.NodeImage)
	cluster := strings.Replace(clusterConfig(l, head.FabricIP, map[string]string{w.Name: ""}),
		fmt.Sprintf("  runtime = { host = { ray_command = %q } }\n", head.RayCommand), "  "+runtime+"\n", 1)
	deploy := strings.Replace(deploymentConfig(l, head.FabricIP, 2, ""), `vllm_command         = "/usr/local/bin/vllm"`, "", 1)
	noContainer := func(s *terraform.State) error {
		for _, n := range l.Nodes {
			out, err := lab.Exec(context.Background(), n, "docker", "ps", "-a", "-q", "--filter", "name=^ray-node$")
			if err != nil || strings.TrimSpace(out) != "" {
				return fmt.Errorf("container ray-node still on %s after destroy (%q, %w)", n.Name, out, err)
			}
		}
		return noVLLMLeft(l)(s)
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noContainer,
		Steps: []resource.TestStep{{
			Config: cluster + deploy,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("registered_ip"), knownvalue.StringExact(w.FabricIP)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head").AtMapKey("registered_ip"), knownvalue.StringExact(head.FabricIP)),
				statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
			},
			Check: func(s *terraform.State) error {
				for _, n := range l.Nodes {
					// Ray runs inside the container, not beside it.
					out, err := lab.Exec(context.Background(), n, "docker", "exec", "ray-node", "pgrep", "-x", "raylet")
					if err != nil || strings.TrimSpace(out) == "" {
						return fmt.Errorf("no raylet inside ray-node on %s: %q %w", n.Name, out, err)
					}
				}
				endpoint := s.RootModule().Resources[deployAddr].Primary.Attributes["endpoint"]
				if code, body, err := chat(endpoint, ""); err != nil || code != 200 {
					return fmt.Errorf("chat completion through %s: %d %s %w", endpoint, code, body, err)
				}
				return nil
			},
		}},
	})
}

// Update restarts in place behind the same readiness gate; a server that
// never becomes ready fails the apply with its log's tail and is stopped.
func TestAccVLLMDeployment_updateAndReadinessFailure(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	cluster := clusterConfig(l, head.FabricIP, map[string]string{w.Name: ""})
	base := deploymentConfig(l, head.FabricIP, 2, "")
	identity := statecheck.CompareValue(compare.ValuesDiffer())
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: []resource.TestStep{
			{
				Config:            cluster + base,
				ConfigStateChecks: []statecheck.StateCheck{identity.AddStateValue(deployAddr, tfjsonpath.New("process_identity"))},
			},
			{
				// A changed env restarts the server in place: a new process, serving.
				Config: cluster + strings.Replace(base, `VLLM_STANDIN_PLACEMENT_WAIT_S = "15"`, `VLLM_STANDIN_PLACEMENT_WAIT_S = "16"`, 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(deployAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					identity.AddStateValue(deployAddr, tfjsonpath.New("process_identity")),
					statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				},
			},
			{
				// The server ends up on another port: readiness on 8000 never comes.
				Config: cluster + strings.Replace(
					strings.Replace(base, `VLLM_STANDIN_PLACEMENT_WAIT_S = "15"`, `VLLM_STANDIN_PLACEMENT_WAIT_S = "16"`, 1),
					`timeouts             = { create = "3m", update = "3m" }`,
					`timeouts             = { create = "3m", update = "25s" }
  extra_args           = ["--port", "8013"]`, 1),
				ExpectError: regexp.MustCompile(`(?s)vLLM did not become ready.*Last 40 lines of the server log.*vLLM stand-in`),
			},
			{
				// Nothing was left running by the failed apply.
				PreConfig: func() {
					out, _ := lab.Exec(context.Background(), head, "sh", "-c", "pgrep -af '[v]llm serve'; ss -Hltn 'sport = :8013'; true")
					if strings.TrimSpace(out) != "" {
						t.Fatalf("the server that never became ready is still running:\n%s", out)
					}
				},
				Config: cluster + base,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				},
			},
		},
	})
}
