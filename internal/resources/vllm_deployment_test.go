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
	"sort"
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
	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

const deployAddr = "spark_vllm_deployment.tiny"

// openTofu: the write-only api_key_wo needs a CLI that supports write-only
// attributes (OpenTofu 1.11+, Terraform 1.11+); Terraform 1.8.5 uses the
// api_key_file alternative, as an operator on an older CLI would.
func openTofu() bool { return os.Getenv("TF_ACC_PROVIDER_HOST") == "registry.opentofu.org" }

// deploy describes one real `vllm serve` of the lab's tiny model, on the
// cluster's head with the cluster's runtime.
type deploy struct {
	name        string // resource name; default "tiny"
	hostIP      string // "" leaves host_ip null
	tp          int
	port        int
	keyLine     string
	env         map[string]string // beside the CPU settings every deployment gets
	model       string            // "" is the head's tiny model
	modelRef    string            // an expression for model instead, e.g. spark_model.x.source.path
	vllmCommand string            // "" is the head's
	runtime     string            // the runtime's value; "" is the cluster's
	rayAddress  string            // a literal ray_address; "" is the cluster's head_address
	moreArgs    []string          // extra_args after the lab's own
	extra       []string          // more attribute lines
}

// legacyExecutor: vLLM 0.32's legacy Ray executor, the one that pins bundle
// 0 to node:<VLLM_HOST_IP> (as every vLLM before 0.21 does by default).
var legacyExecutor = map[string]string{"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "0"}

// config renders the deployment for real vLLM (its CPU build) on the lab:
// the tiny model made at image-build time, eager mode, a small KV cache.
func (d deploy) config(l *lab.File) string {
	head := l.Nodes[0]
	if d.name == "" {
		d.name = "tiny"
	}
	if d.tp == 0 {
		d.tp = 1
	}
	if d.port == 0 {
		d.port = 8000
	}
	if d.model == "" {
		d.model = head.ModelPath
	}
	model := fmt.Sprintf("%q", d.model)
	if d.modelRef != "" {
		model = d.modelRef
	}
	if d.vllmCommand == "" {
		d.vllmCommand = head.VLLMCommand
	}
	if d.runtime == "" {
		d.runtime = "spark_ray_cluster.lab.runtime"
	}
	rayAddress := "spark_ray_cluster.lab.head_address"
	if d.rayAddress != "" {
		rayAddress = fmt.Sprintf("%q", d.rayAddress)
	}
	args := `"--dtype", "float32", "--max-model-len", "256", "--enforce-eager"`
	for _, a := range d.moreArgs {
		args += fmt.Sprintf(", %q", a)
	}
	host := "null"
	if d.hostIP != "" {
		host = fmt.Sprintf("%q", d.hostIP)
	}
	env := map[string]string{"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
	for k, v := range d.env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var envLines []string
	for _, k := range keys {
		envLines = append(envLines, fmt.Sprintf("%s = %q", k, env[k]))
	}
	vars := ""
	if strings.Contains(d.keyLine, "var.vllm_api_key") {
		vars = "variable \"vllm_api_key\" {\n  type      = string\n  sensitive = true\n}\n"
	}
	return vars + fmt.Sprintf(`
resource "spark_vllm_deployment" %q {
  head                 = { ssh_host = spark_ray_cluster.lab.head.ssh_host }
  runtime              = %s
  ray_address          = %s
  model                = %s
  served_model_name    = "tiny"
  tensor_parallel_size = %d
  port                 = %d
  host_ip              = %s
  vllm_command         = %q
  %s
  env                  = { %s }
  extra_args           = [%s]
  timeouts             = { create = "5m", update = "5m" }
  %s
}
`, d.name, d.runtime, rayAddress, model, d.tp, d.port, host, d.vllmCommand, d.keyLine, strings.Join(envLines, ", "), args, strings.Join(d.extra, "\n  "))
}

// keySetup puts a canary API key where the deployment reads it and returns
// the attribute line that passes it.
func keySetup(t *testing.T, l *lab.File, head lab.Node, canary string) string {
	t.Helper()
	if openTofu() {
		// As an operator would: from a sensitive variable, never a literal.
		t.Setenv("TF_VAR_vllm_api_key", canary)
		// The same canary as a secret environment variable, as HF_TOKEN is given.
		return "api_key_wo = var.vllm_api_key\n  api_key_wo_version = 1\n" +
			"  secret_env_wo = { SPARK_CANARY = var.vllm_api_key }\n  secret_env_wo_version = 1"
	}
	// The SSH user's own 0600 file, as an operator keeps it.
	acctest.OnNode(t, head, "write the API key file", `umask 077; printf '%s\n' "$1" > /etc/vllm-api-key && chown "$2" /etc/vllm-api-key`,
		canary, l.SSHUser)
	return `api_key_file = "/etc/vllm-api-key"`
}

func chat(endpoint, key string) (int, string, error) {
	body, _ := json.Marshal(map[string]any{"model": "tiny", "max_tokens": 4,
		"messages": []map[string]string{{"role": "user", "content": "hello"}}})
	req, _ := http.NewRequest(http.MethodPost, endpoint+"/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
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
			out, err := acctest.Running(n, acctest.VLLMServe, acctest.VLLMPort)
			if err != nil {
				return fmt.Errorf("cannot look for vLLM on %s: %w", n.Name, err)
			}
			if strings.TrimSpace(out) != "" {
				return fmt.Errorf("vLLM still running or port 8000 open on %s after destroy:\n%s", n.Name, out)
			}
		}
		return noRayLeft(l)(s)
	}
}

// handStart runs `vllm serve` by hand over SSH on the head — outside the
// provider, as an operator would — with env, waits (bounded) for want in its
// log, stops it, and returns the log's lines that matter and the seconds it
// took. It is how a test compares the plan's prediction with real vLLM.
func handStart(t *testing.T, l *lab.File, env map[string]string, want string) (string, int) {
	t.Helper()
	head := l.Nodes[0]
	pool, err := transport.NewPool(transport.Config{User: l.SSHUser, PrivateKeyFile: l.PrivateKeyFile, KnownHostsFile: l.KnownHostsFile})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := pool.Get(context.Background(), transport.Endpoint{Host: head.SSHHost})
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"env"}
	for k, v := range env {
		argv = append(argv, k+"="+v)
	}
	argv = append(argv, "VLLM_CPU_KVCACHE_SPACE=1", "HF_HUB_OFFLINE=1", head.VLLMCommand, "serve", head.ModelPath,
		"--served-model-name", "tiny", "--dtype", "float32", "--max-model-len", "256", "--enforce-eager",
		"--distributed-executor-backend", "ray", "--port", "8009")
	// $1: the text to wait for; the rest: the command. At most 120 s.
	script := ray.AuthEnv + `
want=$1; shift; log=$(mktemp); start=$(date +%s)
setsid "$@" > "$log" 2>&1 < /dev/null & pid=$!
i=0; while [ $i -lt 120 ] && kill -0 $pid 2>/dev/null && ! grep -q "$want" "$log"; do sleep 1; i=$((i+1)); done
echo "@@seconds $(( $(date +%s) - start ))"
kill -TERM -$pid 2>/dev/null; j=0; while kill -0 $pid 2>/dev/null && [ $j -lt 20 ]; do sleep 1; j=$((j+1)); done
kill -KILL -$pid 2>/dev/null
grep -E "No available node types|Waiting for creating a placement group|Application startup complete|Error" "$log" | head -n 8; rm -f "$log"`
	res, err := c.Run(context.Background(), transport.Cmd{Step: "vllm serve by hand", Argv: transport.Script(script, append([]string{want}, argv...)...)})
	if err != nil {
		t.Fatalf("vllm serve by hand: %v", err)
	}
	out := string(res.Stdout)
	var secs int
	if _, rest, ok := strings.Cut(out, "@@seconds "); ok {
		_, _ = fmt.Sscanf(rest, "%d", &secs)
	}
	return out, secs
}

// The field report on real vLLM with the legacy executor (VLLM 0.32's
// VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0, the behaviour of every vLLM before
// 0.21): Ray auto-detects the head's external address, VLLM_HOST_IP names
// the fabric one. The plan refuses it — on the first plan and on a live
// cluster — and nothing starts; the same settings started by hand make real
// vLLM print the hang the plan predicted; the fixed configuration serves a
// real completion; a second deployment that needs the GPU the first holds
// is refused at plan, naming the holder.
func TestAccVLLMDeployment_fieldReportLegacyExecutor(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	canary := "canary-key-" + fmt.Sprint(time.Now().UnixNano())
	logFile := filepath.Join(t.TempDir(), "trace.log")
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_LOG_PATH", logFile)
	keyLine := keySetup(t, l, head, canary)
	cluster := rayCluster{workers: map[string]string{w.Name: ""}}.config(l)
	mistake := deploy{hostIP: head.FabricIP, env: legacyExecutor, keyLine: keyLine}
	fixed := deploy{hostIP: head.ExternalIP, env: legacyExecutor, keyLine: keyLine}
	refused := func(verb string) *regexp.Regexp {
		return regexp.MustCompile(`(?s)vLLM placement address does not match.*node:` + regexp.QuoteMeta(head.FabricIP) +
			`.*` + verb + `\s+the\s+head\s+as\s+node:` + regexp.QuoteMeta(head.ExternalIP) +
			`.*vLLM\s+` + regexp.QuoteMeta(l.VLLMVersion) + `\s+runs\s+RayDistributedExecutor.*host_ip = "` + regexp.QuoteMeta(head.ExternalIP) +
			`".*node_ip = "` + regexp.QuoteMeta(head.FabricIP) + `"`)
	}
	r := newRefusals(t, l)
	steps := r.steps(resource.TestStep{
		// First plan: neither the cluster nor the deployment exists yet.
		Config:      cluster + mistake.config(l),
		ExpectError: refused("will\\s+register"),
	})
	steps = append(steps, r.then(resource.TestStep{
		// The cluster alone, so real vLLM has a Ray to hang on.
		Config: cluster,
	}))
	steps = append(steps, r.steps(resource.TestStep{
		PreConfig: func() {
			// The prediction against reality: the same settings, by hand.
			out, secs := handStart(t, l, map[string]string{"RAY_ADDRESS": head.ExternalIP + ":6379", "VLLM_HOST_IP": head.FabricIP,
				"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "0"}, "Waiting for creating a placement group")
			if !strings.Contains(out, "Waiting for creating a placement group") ||
				!strings.Contains(out, "'node:"+head.FabricIP+"': 0.001") {
				t.Fatalf("real vLLM did not hang on node:%s as the plan predicts:\n%s", head.FabricIP, out)
			}
			t.Logf("real vLLM by hand, %d s after start:\n%s", secs, out)
		},
		// The live cluster: the same refusal, from Ray's own node table.
		Config:      cluster + mistake.config(l),
		ExpectError: refused("registered"),
	})...)
	steps = append(steps, r.then(resource.TestStep{
		Config: cluster + fixed.config(l),
		ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
			plancheck.ExpectResourceAction(deployAddr, plancheck.ResourceActionCreate),
			plancheck.ExpectKnownValue(deployAddr, tfjsonpath.New("executor"), knownvalue.StringExact("RayDistributedExecutor")),
			plancheck.ExpectKnownValue(deployAddr, tfjsonpath.New("placement_pinned"), knownvalue.Bool(true)),
			plancheck.ExpectKnownValue(deployAddr, tfjsonpath.New("vllm_version"), knownvalue.StringExact(l.VLLMVersion)),
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
			if err := acctest.SecretInState(s, canary); err != nil {
				return fmt.Errorf("the API key: %w", err)
			}
			out, err := lab.Exec(context.Background(), head, "sh", "-c", `for p in $(pgrep -f '[v]llm serve'); do tr '\0' ' ' < /proc/$p/cmdline; done`)
			if err != nil || strings.Contains(out, canary) || !strings.Contains(out, "serve") {
				return fmt.Errorf("the API key is in vllm's argv, or vllm is not running: %q %w", out, err)
			}
			if openTofu() {
				// secret_env_wo reached the server's environment, and only there.
				env, err := lab.Exec(context.Background(), head, "sh", "-c", `for p in $(pgrep -f '[v]llm serve'); do tr '\0' '\n' < /proc/$p/environ; done`)
				if err != nil || !strings.Contains(env, "SPARK_CANARY="+canary) {
					return fmt.Errorf("secret_env_wo did not reach vllm serve's environment (%w)", err)
				}
			}
			return nil
		},
	}), resource.TestStep{
		ResourceName:      deployAddr,
		ImportState:       true,
		ImportStateId:     head.SSHHost + ":8000",
		ImportStateVerify: true,
		// Not readable back from the server: how the key and settings were given.
		ImportStateVerifyIgnore: []string{"api_key_wo", "api_key_wo_version", "secret_env_wo", "secret_env_wo_version", "api_key_file", "env", "runtime", "timeouts"},
	}, resource.TestStep{
		// The same with an import block: the plan adopts the running server
		// in place, restarting nothing.
		ResourceName:       deployAddr,
		ImportState:        true,
		ImportStateKind:    resource.ImportBlockWithID,
		ImportStateId:      head.SSHHost + ":8000",
		ExpectNonEmptyPlan: true,
		ImportPlanChecks: resource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
			acctest.ExpectAdoptedInPlace(deployAddr),
		}},
	})
	second := deploy{name: "second", hostIP: head.ExternalIP, env: legacyExecutor, tp: 2, port: 8001}
	steps = append(steps, r.steps(
		resource.TestStep{
			// A second deployment needs 2 GPUs; the first holds one of the 2.
			Config: cluster + fixed.config(l) + second.config(l),
			ExpectError: regexp.MustCompile(`(?s)Not enough free GPUs.*only\s+1\s+of\s+the\s+cluster's\s+2\s+are\s+free.*1\s+GPU\s+by\s+placement\s+group\s+[0-9a-f]+\s+\(.*` +
				regexp.QuoteMeta(head.ModelPath) + `.*--port\s+8000`),
		},
		resource.TestStep{
			// TP=3 on 2 GPUs: refused from Ray's live node table.
			Config:      cluster + deploy{hostIP: head.ExternalIP, env: legacyExecutor, keyLine: keyLine, tp: 3}.config(l),
			ExpectError: regexp.MustCompile(`(?s)exceed the cluster's GPUs.*= 3 GPUs.*have 2`),
		},
	)...)
	steps = append(steps, r.then(resource.TestStep{
		// Drift: the server dies. The plan shows it; apply restarts it.
		PreConfig: func() {
			if _, err := lab.Exec(context.Background(), head, "pkill", "-9", "-f", "vllm serve"); err != nil {
				t.Fatal(err)
			}
		},
		Config: cluster + fixed.config(l),
		ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
			plancheck.ExpectNonEmptyPlan(),
			plancheck.ExpectResourceAction(deployAddr, plancheck.ResourceActionUpdate),
		}, PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
		},
	}))
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps:                    steps,
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
	if !bytes.Contains(b, []byte("this vLLM serves anyway")) || !bytes.Contains(b, []byte("would hang")) {
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
