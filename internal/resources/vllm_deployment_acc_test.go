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

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

const deployAddr = "spark_vllm_deployment.tiny"

// openTofu: the write-only api_key_wo needs a CLI that supports write-only
// attributes (OpenTofu 1.11+, Terraform 1.11+); Terraform 1.8.5 uses the
// api_key_file alternative, as an operator on an older CLI would.
func openTofu() bool { return os.Getenv("TF_ACC_PROVIDER_HOST") == "registry.opentofu.org" }

// terraformOnly is the SkipFunc of a step that runs on Terraform only: one
// whose outcome is the provider's own work on the nodes (a rank killed and
// the set restarted, a data-parallel restart), which reaches the provider
// through the same protocol 6 calls from either CLI, and which costs a vLLM
// start-up (about a minute of the lab's two cores). OpenTofu runs the steps
// whose outcome depends on the CLI (CONTRIBUTING, "why OpenTofu runs a subset").
func terraformOnly() (bool, error) { return openTofu(), nil }

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
			if openTofu() {
				return // real vLLM's hang does not depend on the CLI: shown once, on Terraform's run
			}
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
		SkipFunc: terraformOnly,
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
