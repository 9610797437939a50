package resources_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
)

// vLLM 0.32's default executor (RayExecutorV2) pins nothing and takes node
// addresses from Ray: the field report's setting serves. The plan says so
// in a warning, never an error, and apply serves a real completion, with
// tensor parallel 2 across the two nodes.
func TestAccVLLMDeployment_defaultExecutorWarnsAndServes(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	logFile := filepath.Join(t.TempDir(), "trace.log")
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_LOG_PATH", logFile)
	cluster := rayCluster{workers: map[string]string{w.Name: ""}}.config(l)
	// Tensor parallel across both nodes: one Ray "GPU" each.
	mismatch := deploy{hostIP: head.FabricIP, tp: 2}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: []resource.TestStep{{
			Config: cluster + mismatch.config(l),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(deployAddr, tfjsonpath.New("executor"), knownvalue.StringExact("RayExecutorV2")),
				plancheck.ExpectKnownValue(deployAddr, tfjsonpath.New("placement_pinned"), knownvalue.Bool(false)),
				plancheck.ExpectKnownValue(deployAddr, tfjsonpath.New("vllm_version"), knownvalue.StringExact(l.VLLMVersion)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				// RayExecutorV2 places by Ray's address for the head.
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("placement_ip"), knownvalue.StringExact(head.ExternalIP)),
			},
			Check: func(s *terraform.State) error {
				endpoint := s.RootModule().Resources[deployAddr].Primary.Attributes["endpoint"]
				if code, body, err := chat(endpoint, ""); err != nil || code != 200 || !strings.Contains(body, "chat.completion") {
					return fmt.Errorf("chat completion through %s: %d %s %w", endpoint, code, body, err)
				}
				out, err := lab.Exec(context.Background(), head, "sh", "-c", `for p in $(pgrep -f '[v]llm serve'); do tr '\0' '\n' < /proc/$p/environ | grep '^VLLM_HOST_IP='; done`)
				if err != nil || strings.TrimSpace(out) != "VLLM_HOST_IP="+head.FabricIP {
					return fmt.Errorf("vllm serve should run with VLLM_HOST_IP=%s (the mismatch), has %q (%w)", head.FabricIP, out, err)
				}
				return nil
			},
		}},
	})
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !acctest.Warned(b, "VLLM_HOST_IP is not the address Ray registered for the head (this vLLM serves anyway)", "would hang") {
		t.Fatalf("the plan did not warn that VLLM_HOST_IP = %s is not what Ray registered (log %s)", head.FabricIP, logFile)
	}
}

// On a first plan (cluster and deployment in one configuration) nothing
// runs yet: D8 and D11 check against what the cluster's plan concluded.
func TestAccVLLMDeployment_firstPlanChecks(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	cluster := rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}}.config(l)
	inContainer := rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""},
		runtime: fmt.Sprintf(`{ container = { image = %q, name = "ray-node", gpus = "", run_args = ["-v", "/opt/ray:/opt/ray:ro"] } }`, l.NodeImage)}.config(l)
	onHost := deploy{hostIP: head.FabricIP, runtime: fmt.Sprintf("{ host = { ray_command = %q } }", head.RayCommand)}.config(l)
	r := newRefusals(t, l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: append(r.steps(
			resource.TestStep{
				Config:      cluster + deploy{hostIP: head.FabricIP, tp: 3}.config(l),
				ExpectError: regexp.MustCompile(`(?s)exceed the cluster's GPUs.*= 3 GPUs.*will\s+register\s+2\s+\(head 1, ` + w.Name + ` 1\)`),
			},
			// D32, on the nodes' own memory: a KV cache larger than any
			// lab node has available, and none at all.
			resource.TestStep{
				Config:      cluster + deploy{hostIP: head.FabricIP, env: map[string]string{"VLLM_CPU_KVCACHE_SPACE": "4096"}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)The KV cache asked for is not free on the node.*4096\.00 GiB KV cache.*available as vLLM reads it.*Rule D32`),
			},
			resource.TestStep{
				Config:      cluster + deploy{hostIP: head.FabricIP, env: map[string]string{"VLLM_CPU_KVCACHE_SPACE": "0"}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)No memory is left for the KV cache.*VLLM_CPU_KVCACHE_SPACE in env.*Rule D32`),
			},
			resource.TestStep{
				Config:      inContainer + onHost,
				ExpectError: regexp.MustCompile(`(?s)vllm serve would run outside the head's Ray.*on the host.*runtime\s+puts\s+Ray\s+in\s+container\s+ray-node`),
			},
		), r.done()),
	})
}

// The container runtime, for real: Ray and real vLLM run in a container on
// each node (`docker run -d --network host`), started from the image the lab
// loaded into each node's own Docker engine; the lab's Python environment
// (Ray, vLLM, the model) comes in read-only with run_args, as a model cache
// would on a real box. Ray and vLLM register the fabric address everywhere.
func TestAccVLLMDeployment_containerRuntime(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	runtime := fmt.Sprintf(`{ container = { image = %q, name = "ray-node", gpus = "", shm_size = "1g", ray_command = "/opt/ray/bin/ray", run_args = ["-v", "/opt/ray:/opt/ray:ro"] } }`, l.NodeImage)
	cluster := rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}, runtime: runtime}.config(l)
	noContainer := func(s *terraform.State) error {
		for _, n := range l.Nodes {
			out, err := lab.Exec(context.Background(), n, "docker", "ps", "-a", "-q", "--filter", "name=^ray-node$")
			if err != nil || strings.TrimSpace(out) != "" {
				return fmt.Errorf("container ray-node still on %s after destroy (%q, %w)", n.Name, out, err)
			}
		}
		return noVLLMLeft(l)(s)
	}
	good := cluster + deploy{hostIP: head.FabricIP}.config(l)
	// The same deployment told to run on the host, where no Ray runs (D11, live).
	onHost := cluster + deploy{hostIP: head.FabricIP, runtime: fmt.Sprintf("{ host = { ray_command = %q } }", head.RayCommand)}.config(l)
	r := newRefusals(t, l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noContainer,
		Steps: append([]resource.TestStep{{
			Config: good,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("registered_ip"), knownvalue.StringExact(w.FabricIP)),
				// The version is read inside the container the server will run in.
				plancheck.ExpectKnownValue(deployAddr, tfjsonpath.New("vllm_version"), knownvalue.StringExact(l.VLLMVersion)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head").AtMapKey("registered_ip"), knownvalue.StringExact(head.FabricIP)),
				statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("placement_ip"), knownvalue.StringExact(head.FabricIP)),
			},
			Check: func(s *terraform.State) error {
				for _, n := range []lab.Node{head, w} { // the cluster's nodes: a lab may have more
					// Ray runs inside the container, not beside it.
					out, err := lab.Exec(context.Background(), n, "docker", "exec", "ray-node", "pgrep", "-x", "raylet")
					if err != nil || strings.TrimSpace(out) == "" {
						return fmt.Errorf("no raylet inside ray-node on %s: %q %w", n.Name, out, err)
					}
				}
				if out, err := lab.Exec(context.Background(), head, "docker", "exec", "ray-node", "pgrep", "-f", "vllm serve"); err != nil || strings.TrimSpace(out) == "" {
					return fmt.Errorf("vllm serve is not running inside ray-node on the head: %q %w", out, err)
				}
				endpoint := s.RootModule().Resources[deployAddr].Primary.Attributes["endpoint"]
				if code, body, err := chat(endpoint, ""); err != nil || code != 200 {
					return fmt.Errorf("chat completion through %s: %d %s %w", endpoint, code, body, err)
				}
				// Ray's token is inside the container: the gRPC reading
				// finds it there, and names the server inside it.
				return gcsReadersAgree(l, raycluster.Spec{Runtime: nodeexec.Runtime{Container: &nodeexec.Container{Name: "ray-node"}}}, " serve ")(s)
			},
		}}, append(r.steps(resource.TestStep{
			Config:      onHost,
			ExpectError: regexp.MustCompile(`(?s)vllm serve would run outside the head's Ray.*on the host.*runtime\s+puts\s+Ray\s+in\s+container\s+ray-node`),
		}), r.then(resource.TestStep{Config: good, PlanOnly: true}), resource.TestStep{
			// The head's box reboots: its ray-node container stays exited
			// (no restart policy). The plan says the cluster is gone and the
			// server stopped (docker exec into the exited container used to
			// fail every plan and destroy); the apply brings both back.
			PreConfig: func() {
				if err := lab.Restart(context.Background(), head); err != nil {
					t.Fatal(err)
				}
			},
			Config: good,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionCreate),
			}, PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
			},
		})...),
	})
}

// Update restarts in place behind the same readiness gate; a server that
// exits before it is ready fails the apply with its log's tail and leaves
// nothing running.
func TestAccVLLMDeployment_updateAndReadinessFailure(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	cluster := rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}}.config(l)
	base := deploy{hostIP: head.FabricIP}
	changed := deploy{hostIP: head.FabricIP, env: map[string]string{"VLLM_LOGGING_LEVEL": "DEBUG"}}
	// The lab's model has 512 positions: vLLM refuses a longer context at
	// start-up, after the launch, which only the readiness gate can see.
	tooLong := changed
	tooLong.extra = []string{`extra_args = ["--dtype", "float32", "--max-model-len", "4096", "--enforce-eager"]`}
	identity := statecheck.CompareValue(compare.ValuesDiffer())
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: []resource.TestStep{
			{
				Config:            cluster + base.config(l),
				ConfigStateChecks: []statecheck.StateCheck{identity.AddStateValue(deployAddr, tfjsonpath.New("process_identity"))},
			},
			{
				// A changed env restarts the server in place: a new process, serving.
				Config: cluster + changed.config(l),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(deployAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					identity.AddStateValue(deployAddr, tfjsonpath.New("process_identity")),
					statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				},
			},
			{
				// The server exits while loading: readiness never comes. The one
				// configuration still edited as text: as fields, its extra_args
				// and update timeout would render elsewhere in the block, and
				// only a lab run can show the test unchanged by that.
				Config: cluster + strings.Replace(strings.Replace(tooLong.config(l),
					`extra_args           = ["--dtype", "float32", "--max-model-len", "256", "--enforce-eager"]`, "", 1),
					`timeouts             = { create = "5m", update = "5m" }`, `timeouts             = { create = "5m", update = "3m" }`, 1),
				ExpectError: regexp.MustCompile(`(?s)vLLM did not become ready.*Last 40 lines of the server log.*vllm`),
			},
			{
				// Nothing was left running by the failed apply.
				PreConfig: func() {
					out, err := acctest.Running(head, acctest.VLLMServe, acctest.VLLMPort)
					if err != nil || strings.TrimSpace(out) != "" {
						t.Fatalf("the server that never became ready is still running (or the look failed: %v):\n%s", err, out)
					}
				},
				Config: cluster + base.config(l),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				},
			},
		},
	})
}

// The field report, unmodified, on the lab's second real vLLM release
// (0.11.0, its CPU build; its Ray executor pins bundle 0 to
// node:<VLLM_HOST_IP> by default, as the releases in NVIDIA's DGX Spark
// containers up to 26.05 do): Ray registers the head's external address,
// VLLM_HOST_IP is its fabric address, no executor variable. The plan refuses
// it, naming the release, with nothing started; with host_ip = what Ray
// registered, the same release serves. Tensor parallel 1: vLLM 0.11.0's CPU
// platform turns the Ray executor into its multiprocessing one for a world
// size above 1 ("ray is not supported on CPU, fallback to mp",
// vllm/platforms/cpu.py L177-184), which no GPU platform does; at world size
// 1 the Ray executor runs, and its bundle 0 carries the same pin.
func TestAccVLLMDeployment_fieldReportOnAPinningRelease(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	second := l.SecondVLLM
	cluster := rayCluster{workers: map[string]string{w.Name: ""}, rayCommand: second.RayCommand}.config(l) // Ray registers the external addresses
	r := newRefusals(t, l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: append(r.steps(resource.TestStep{
			Config: cluster + deploy{hostIP: head.FabricIP, model: second.ModelPath, vllmCommand: second.VLLMCommand}.config(l),
			ExpectError: regexp.MustCompile(`(?s)vLLM placement address does not match the address Ray registered.*node:` +
				regexp.QuoteMeta(head.FabricIP) + `.*vLLM ` + regexp.QuoteMeta(second.VLLMVersion) + `\s+runs\s+RayDistributedExecutor`),
		}), r.then(resource.TestStep{
			Config: cluster + deploy{hostIP: head.ExternalIP, model: second.ModelPath, vllmCommand: second.VLLMCommand}.config(l),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(deployAddr, tfjsonpath.New("vllm_version"), knownvalue.StringExact(second.VLLMVersion)),
				plancheck.ExpectKnownValue(deployAddr, tfjsonpath.New("executor"), knownvalue.StringExact("RayDistributedExecutor")),
				plancheck.ExpectKnownValue(deployAddr, tfjsonpath.New("placement_pinned"), knownvalue.Bool(true)),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
			},
			Check: func(s *terraform.State) error {
				endpoint := s.RootModule().Resources[deployAddr].Primary.Attributes["endpoint"]
				if code, body, err := chat(endpoint, ""); err != nil || code != 200 {
					return fmt.Errorf("chat completion through %s: %d %s %w", endpoint, code, body, err)
				}
				return nil
			},
		})),
	})
}
