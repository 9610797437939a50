package resources_test

import (
	"context"
	"fmt"
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
)

const mpAddr = "spark_vllm_mp_deployment.pair"

// mpDeploy is one spark_vllm_mp_deployment of the lab's tiny model across
// the lab's two nodes, rank 0 on the first, with real vLLM (its CPU build).
type mpDeploy struct {
	masterAddr string            // "" leaves it null (rank 0's node_ip)
	iface      map[string]string // a node's interface; absent: the lab's fabric port
	tp, dp     int
	hostKeys   bool   // pin each node's host key
	keyLine    string // the API key's attribute lines (keySetup)
	kvGiB      string // VLLM_CPU_KVCACHE_SPACE; "" the lab's 1
	minGbps    string // fabric_probe's floor; "" no fabric_probe
	restart    string // restart; "" leaves it unset ("no")
	user       string // each node's ssh_user; "" the provider's (the lab's SSH user)
}

// fabricPorts is each lab node's fabric port name, read off the node.
func fabricPorts(t *testing.T, l *lab.File) map[string]string {
	t.Helper()
	ports := map[string]string{}
	for _, n := range l.Nodes[:2] {
		name, err := lab.FabricInterface(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		ports[n.Name] = name
	}
	return ports
}

// config is the deployment on the lab; ports are the nodes' fabric ports
// (fabricPorts), each node's interface unless d.iface names another.
func (d mpDeploy) config(l *lab.File, ports map[string]string) string {
	if d.tp == 0 {
		d.tp = 2
	}
	if d.dp == 0 {
		d.dp = 1
	}
	if d.kvGiB == "" {
		d.kvGiB = "1"
	}
	master := ""
	if d.masterAddr != "" {
		master = fmt.Sprintf("master_addr = %q", d.masterAddr)
	}
	if d.minGbps != "" {
		master += fmt.Sprintf("\n  fabric_probe = { min_gbps = %s }", d.minGbps)
	}
	if d.restart != "" {
		master += fmt.Sprintf("\n  restart = %q", d.restart)
	}
	var nodes []string
	for i, n := range l.Nodes[:2] {
		iface, ok := d.iface[n.Name]
		if !ok {
			iface = ports[n.Name]
		}
		pin := ""
		if d.hostKeys {
			pin = fmt.Sprintf(", host_key = %q", n.HostKey)
		}
		if d.user != "" {
			pin += fmt.Sprintf(", ssh_user = %q", d.user)
		}
		nodes = append(nodes, fmt.Sprintf(`%s = { ssh_host = %q, rank = %d, node_ip = %q, interface = %q%s }`, n.Name, n.SSHHost, i, n.FabricIP, iface, pin))
	}
	return acctest.Provider{}.Config(l) + fmt.Sprintf(`
resource "spark_vllm_mp_deployment" "pair" {
  nodes = {
    %s
  }
  model                = %q
  served_model_name    = "tiny"
  tensor_parallel_size = %d
  data_parallel_size   = %d
  %s
  %s
  vllm_command         = %q
  env                  = { VLLM_CPU_KVCACHE_SPACE = %q, HF_HUB_OFFLINE = "1" }
  extra_args           = ["--dtype", "float32", "--max-model-len", "256", "--enforce-eager"]
  timeouts             = { create = "6m", update = "6m" }
}
`, strings.Join(nodes, "\n    "), l.Nodes[0].ModelPath, d.tp, d.dp, master, d.keyLine, l.Nodes[0].VLLMCommand, d.kvGiB)
}

// One model served across the lab's two nodes by vLLM's own multi-node mode,
// no Ray anywhere, as the ordinary SSH user: the plan refuses the mistakes
// real vLLM hangs or fails on (each a plan-only step, after which nothing
// runs on the nodes); the clean configuration serves a real completion
// from TP=2 over the fabric; a second plan is empty; fabric_probe set
// measures rank 0 -> rank 1 and restarts nothing, a floor the link cannot
// carry is refused; a headless rank killed
// shows at plan and the apply brings the whole set back; destroy leaves no
// vLLM on either node.
func TestAccVLLMMPDeployment_servesAcrossTwoNodes(t *testing.T) {
	l := acctest.Lab(t)
	rank0, rank1 := l.Nodes[0], l.Nodes[1]
	r := newRefusals(t, l)
	ports := fabricPorts(t, l)
	const canary = "mp-canary-5c1d2e"
	key := keySetup(t, l, rank0, canary)
	held := func() {
		// Another user of rank 0's node holds the master port.
		acctest.OnNodeAs(t, rank0, l.SecondSSHUser, "hold port 29501 as another user",
			`setsid /opt/ray/bin/python -c 'import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 29501)); s.listen(); time.sleep(600)' >/dev/null 2>&1 < /dev/null &
for i in $(seq 50); do ss -Hltn 'sport = :29501' | grep -q . && exit 0; sleep 0.1; done; exit 1`)
	}
	release := func() {
		acctest.OnNode(t, rank0, "release port 29501", `pkill -u "$1" -f 'bind\(\("0.0.0.0", 29501' ; true`, l.SecondSSHUser)
	}
	vars := ""
	if strings.Contains(key, "var.vllm_api_key") {
		vars = "variable \"vllm_api_key\" {\n  type      = string\n  sensitive = true\n}\n"
	}
	clean := vars + mpDeploy{keyLine: key}.config(l, ports)
	probed := vars + mpDeploy{hostKeys: true, keyLine: key, minGbps: "0.5"}.config(l, ports)
	// The same process on each node across the steps that restart nothing.
	sameProcess := statecheck.CompareValue(compare.ValuesSame())
	identity := tfjsonpath.New("nodes").AtMapKey(rank1.Name).AtMapKey("process_identity")
	steps := r.steps(
		resource.TestStep{ // the field report's kind: the master address is the other node's
			Config:      mpDeploy{masterAddr: rank1.FabricIP}.config(l, ports),
			ExpectError: regexp.MustCompile(`(?s)master_addr ` + regexp.QuoteMeta(rank1.FabricIP) + ` is not bound on node ` + rank0.Name + `.*Rule D26`),
		},
		resource.TestStep{ // the worker's port named as the head's is (Sparks cabled on different ports)
			Config:      mpDeploy{iface: map[string]string{rank1.Name: "enp1s0f1np1"}}.config(l, ports),
			ExpectError: regexp.MustCompile(`(?s)interface "enp1s0f1np1" does not exist on node ` + rank1.Name + `.*Rule D27`),
		},
		resource.TestStep{ // a KV cache larger than the nodes have (each node judged on its own memory)
			Config:      mpDeploy{kvGiB: "4096"}.config(l, ports),
			ExpectError: regexp.MustCompile(`(?s)The KV cache asked for is not free on the node.*4096\.00 GiB KV cache.*available as vLLM reads it.*Rule D32`),
		},
		resource.TestStep{ // a fabric floor the lab's link cannot carry (measured rank 0 -> rank 1 on their node_ip)
			Config: mpDeploy{minGbps: "100000"}.config(l, ports),
			ExpectError: regexp.MustCompile(`(?s)The fabric carries less than its floor.*` + rank0.Name + ` -> ` + rank1.Name + ` over ` +
				regexp.QuoteMeta(rank0.FabricIP) + ` -> ` + regexp.QuoteMeta(rank1.FabricIP) + `.*min_gbps = 100000.*Rule D33`),
		},
		resource.TestStep{
			PreConfig:   held,
			Config:      clean,
			ExpectError: regexp.MustCompile(`(?s)Port 29501 on node ` + rank0.Name + ` \(rank 0\).*already taken.*Rule D29`),
		},
	)
	steps = append(steps,
		r.then(resource.TestStep{
			PreConfig: release,
			Config:    clean,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(mpAddr, plancheck.ResourceActionCreate),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("master_addr"), knownvalue.StringExact(rank0.FabricIP)),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("vllm_version"), knownvalue.StringExact(l.VLLMVersion)),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				statecheck.ExpectKnownValue(mpAddr, tfjsonpath.New("endpoint"), knownvalue.StringExact("http://"+rank0.SSHHost+":8000/v1")),
				sameProcess.AddStateValue(mpAddr, identity),
			},
			Check: resource.ComposeTestCheckFunc(servesChat(canary), ranksRunAsDeclared(t, l, ports), keyNowhere(t, l, canary)),
		}),
		resource.TestStep{Config: clean, ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
		resource.TestStep{
			// Pinning the host keys and measuring the fabric change how the
			// nodes are checked, not what runs.
			Config: probed,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(mpAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(mpAddr, identity, knownvalue.NotNull()),
				plancheck.ExpectUnknownValue(mpAddr, tfjsonpath.New("fabric_gbps")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				sameProcess.AddStateValue(mpAddr, identity),
				statecheck.ExpectKnownValue(mpAddr, tfjsonpath.New("fabric_gbps"), knownvalue.MapSizeExact(1)),
				statecheck.ExpectKnownValue(mpAddr, tfjsonpath.New("fabric_gbps").AtMapKey(rank1.Name), knownvalue.NotNull()),
			},
		},
		// Measured again at the next plan, against the floor, without a diff.
		resource.TestStep{Config: probed, ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
		resource.TestStep{
			// A headless rank dies: the plan shows it, the apply restarts the set.
			SkipFunc: terraformOnly,
			PreConfig: func() {
				acctest.OnNode(t, rank1, "kill the headless rank", `pkill -KILL -f '[v]llm serve' ; pkill -KILL -f '[V]LLM::' ; true`)
			},
			Config: clean,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(mpAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
			}},
			Check: resource.ComposeTestCheckFunc(servesChat(canary), ranksRunAsDeclared(t, l, ports)),
		},
		resource.TestStep{
			// Data parallel instead of tensor parallel: one engine on each node,
			// one API on rank 0; the set restarts.
			SkipFunc: terraformOnly,
			Config:   vars + mpDeploy{tp: 1, dp: 2, keyLine: key}.config(l, ports),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(mpAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectUnknownValue(mpAddr, identity),
			}},
			Check: resource.ComposeTestCheckFunc(servesChat(canary), ranksRunAsDeclared(t, l, ports)),
		},
	)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps:                    steps,
	})
	release()
}

// servesChat asks rank 0's endpoint for a completion with the key, and
// checks one without it is refused.
func servesChat(key string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		endpoint := s.RootModule().Resources[mpAddr].Primary.Attributes["endpoint"]
		if code, body, err := chat(endpoint, key); err != nil || code != 200 || !strings.Contains(body, "chat.completion") {
			return fmt.Errorf("chat completion through %s: %d %s %w", endpoint, code, body, err)
		}
		if code, _, err := chat(endpoint, ""); err != nil || code != 401 {
			return fmt.Errorf("a completion without the API key through %s: %d (want 401) %w", endpoint, code, err)
		}
		return nil
	}
}

// keyNowhere: the API key is in no state attribute and in no process's
// argv on either node.
func keyNowhere(t *testing.T, l *lab.File, key string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for k, v := range s.RootModule().Resources[mpAddr].Primary.Attributes {
			if strings.Contains(v, key) {
				return fmt.Errorf("the API key is in state, at %s", k)
			}
		}
		for _, n := range l.Nodes[:2] {
			if out := acctest.OnNode(t, n, "read every argv", `cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' '`); strings.Contains(out, key) {
				return fmt.Errorf("the API key is in a process's argv on %s", n.Name)
			}
		}
		return nil
	}
}

// ranksRunAsDeclared looks at the nodes: rank 0 serves, rank 1 runs
// --headless, each with its own node's fabric address and interface, as the
// SSH user, and nothing of Ray runs anywhere.
func ranksRunAsDeclared(t *testing.T, l *lab.File, ports map[string]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for i, n := range l.Nodes[:2] {
			out := acctest.OnNode(t, n, "read the rank", `for p in $(pgrep -f '[v]llm serve'); do
  echo "user=$(stat -c %U /proc/$p)"; tr '\0' '\n' < /proc/$p/environ | grep -E '^(VLLM_HOST_IP|GLOO_SOCKET_IFNAME)='
  tr '\0' ' ' < /proc/$p/cmdline; echo; done; pgrep -af '[r]aylet|[g]cs_server' || true`)
			for _, want := range []string{"user=" + l.SSHUser, "VLLM_HOST_IP=" + n.FabricIP, "GLOO_SOCKET_IFNAME=" + ports[n.Name],
				fmt.Sprintf("--node-rank %d", i), "--master-addr " + l.Nodes[0].FabricIP} {
				if !strings.Contains(out, want) {
					return fmt.Errorf("rank %d on %s: want %q in\n%s", i, n.Name, want, out)
				}
			}
			if headless := strings.Contains(out, "--headless"); headless != (i > 0) {
				return fmt.Errorf("rank %d on %s: --headless is %v:\n%s", i, n.Name, headless, out)
			}
			if strings.Contains(out, "raylet") || strings.Contains(out, "gcs_server") {
				return fmt.Errorf("Ray runs on %s:\n%s", n.Name, out)
			}
		}
		return nil
	}
}
