package resources_test

import (
	"context"
	"fmt"
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
// no Ray anywhere, as the ordinary SSH user, under the node's systemd
// (restart = "always"; the user's manager lingers on the lab's nodes): the
// plan refuses the mistakes real vLLM hangs or fails on, and supervision for
// the second user, who does not linger (D34); each a plan-only step, after
// which nothing runs on the nodes. The clean configuration serves a real
// completion from TP=2 over the fabric, as user units that carry no secret;
// a second plan is empty; fabric_probe set measures rank 0 -> rank 1 and
// restarts nothing, a floor the link cannot carry is refused. vLLM killed
// comes back by itself and serves, and the plan afterwards reports the
// restart as a warning and plans nothing; the same after rank 0's whole node
// restarts; a unit changed by hand is drift the apply repairs in place. Then, without
// systemd (restart = "no") and data parallel: a headless rank killed shows
// at plan and the apply brings the whole set back. Destroy leaves no vLLM
// and no unit on either node. One test, so that the set starts as few times
// as these need (each start is about a minute of the lab's two cores).
func TestAccVLLMMPDeployment_servesAcrossTwoNodes(t *testing.T) {
	l := acctest.Lab(t)
	rank0, rank1 := l.Nodes[0], l.Nodes[1]
	r := newRefusals(t, l)
	ports := fabricPorts(t, l)
	key := keySetup(t, l, rank0, mpCanary)
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
	supervised := vars + mpDeploy{keyLine: key, restart: "always"}.config(l, ports)
	probed := vars + mpDeploy{hostKeys: true, keyLine: key, minGbps: "0.5", restart: "always"}.config(l, ports)
	unsupervised := vars + mpDeploy{tp: 1, dp: 2, keyLine: key, restart: "no"}.config(l, ports)
	unit := fmt.Sprintf("spark-vllm-mp-%s-8000.service", rank0.FabricIP)
	// The same process on each node across the steps that restart nothing.
	sameProcess := statecheck.CompareValue(compare.ValuesSame())
	identity := tfjsonpath.New("nodes").AtMapKey(rank1.Name).AtMapKey("process_identity")
	// A new process on rank 0 after each restart systemd made.
	newProcess := statecheck.CompareValue(compare.ValuesDiffer())
	// The same processes before and after the apply that repairs a unit.
	repairedRank0, repairedRank1 := statecheck.CompareValue(compare.ValuesSame()), statecheck.CompareValue(compare.ValuesSame())
	rank0ID := tfjsonpath.New("nodes").AtMapKey(rank0.Name).AtMapKey("process_identity")
	// The plan's warnings are read from its log: the testing framework
	// does not hand them to a step.
	logFile := filepath.Join(t.TempDir(), "trace.log")
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_LOG_PATH", logFile)
	var mark int64 // the log's size when the set served again
	warned := func(what string, since int64) {
		t.Helper()
		b, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		if !acctest.Warned(b[min(since, int64(len(b))):], "systemd restarted vLLM since the apply", "rank 0 on "+rank0.Name+" was restarted by systemd") {
			t.Fatalf("after %s, the plan did not warn that systemd restarted rank 0 (log %s)", what, logFile)
		}
	}
	endpoint := "http://" + rank0.SSHHost + ":8000/v1"
	// Each step that breaks the set waits, bounded, for a completion
	// through the endpoint, with no apply in between.
	servesAgain := func(what string) {
		t.Helper()
		start := time.Now()
		for time.Since(start) < serveAgainBound {
			if code, body, err := chat(endpoint, mpCanary); err == nil && code == 200 && strings.Contains(body, "chat.completion") {
				t.Logf("after %s, served a completion again by itself in %.0f s", what, time.Since(start).Seconds())
				if fi, err := os.Stat(logFile); err == nil {
					mark = fi.Size()
				}
				return
			}
			time.Sleep(2 * time.Second)
		}
		t.Fatalf("after %s, no completion through %s within %s", what, endpoint, serveAgainBound)
	}
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
			// The second user's manager does not linger: its units would
			// not start at boot. Refused, naming the fix.
			Config: vars + mpDeploy{keyLine: key, restart: "always", user: l.SecondSSHUser}.config(l, ports),
			ExpectError: regexp.MustCompile(`(?s)vLLM cannot be supervised on ` + rank0.Name + `.*does not linger.*sudo loginctl\s+enable-linger\s+` +
				l.SecondSSHUser + `.*Rule D34`),
		},
		resource.TestStep{
			PreConfig:   held,
			Config:      supervised,
			ExpectError: regexp.MustCompile(`(?s)Port 29501 on node ` + rank0.Name + ` \(rank 0\).*already taken.*Rule D29`),
		},
	)
	steps = append(steps,
		r.then(resource.TestStep{
			PreConfig: release,
			Config:    supervised,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(mpAddr, plancheck.ResourceActionCreate),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("master_addr"), knownvalue.StringExact(rank0.FabricIP)),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("vllm_version"), knownvalue.StringExact(l.VLLMVersion)),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("restart"), knownvalue.StringExact("always")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				statecheck.ExpectKnownValue(mpAddr, tfjsonpath.New("endpoint"), knownvalue.StringExact("http://"+rank0.SSHHost+":8000/v1")),
				sameProcess.AddStateValue(mpAddr, identity),
				newProcess.AddStateValue(mpAddr, rank0ID),
			},
			Check: resource.ComposeTestCheckFunc(servesChat(), ranksRunAsDeclared(t, l, ports), keyNowhere(t, l, mpCanary),
				unitsInstalled(t, l, unit, mpCanary)),
		}),
		resource.TestStep{Config: supervised, ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
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
			// vLLM crashes on rank 0: systemd starts the set again; the
			// plan warns and plans nothing.
			PreConfig: func() {
				acctest.OnNode(t, rank0, "kill rank 0's vllm serve", `pkill -KILL -u "$1" -f '[v]llm serve'`, l.SSHUser)
				servesAgain("rank 0's vllm serve was killed")
			},
			Config:           probed,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				newProcess.AddStateValue(mpAddr, rank0ID),
			},
		},
		resource.TestStep{
			// Rank 0's whole node restarts (its container: every process
			// gone, systemd boots again).
			PreConfig: func() {
				warned("the crash", 0)
				if err := lab.Restart(context.Background(), rank0); err != nil {
					t.Fatal(err)
				}
				servesAgain("rank 0's node restarted")
			},
			Config:           probed,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				newProcess.AddStateValue(mpAddr, rank0ID),
				repairedRank0.AddStateValue(mpAddr, rank0ID),
				repairedRank1.AddStateValue(mpAddr, identity),
			},
			Check: func(*terraform.State) error { warned("the restart of "+rank0.Name, mark); return nil },
		},
		resource.TestStep{
			// A unit edited by hand (its process still runs): drift, which
			// the apply repairs by writing the unit again, in place: the
			// same processes serve on.
			PreConfig: func() {
				acctest.OnNodeAs(t, rank1, l.SSHUser, "edit rank 1's unit by hand", userSystemctl+
					`f=$HOME/.config/systemd/user/$1; sed -i 's/^RestartSec=10$/RestartSec=1/' "$f" && grep -q '^RestartSec=1$' "$f" && systemctl --user daemon-reload`, unit)
			},
			Config: probed,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(mpAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				repairedRank0.AddStateValue(mpAddr, rank0ID),
				repairedRank1.AddStateValue(mpAddr, identity),
			},
			Check: resource.ComposeTestCheckFunc(servesChat(), unitsInstalled(t, l, unit, mpCanary)),
		},
		resource.TestStep{
			// Data parallel instead of tensor parallel, and no supervisor:
			// one engine on each node, one API on rank 0; the set restarts,
			// its units gone.
			SkipFunc: terraformOnly,
			Config:   unsupervised,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(mpAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectUnknownValue(mpAddr, identity),
			}},
			Check: resource.ComposeTestCheckFunc(servesChat(), ranksRunAsDeclared(t, l, ports), noUnits(t, l, unit)),
		},
		resource.TestStep{
			// Unsupervised, a headless rank dies: the plan shows it, the
			// apply restarts the set.
			SkipFunc: terraformOnly,
			PreConfig: func() {
				// Waited for until no rank process is left on the node
				// (bounded: 10 s), so that the plan below cannot read the
				// rank before the kill has taken, and a rank that is still
				// there (something started it again) fails here, by name.
				acctest.OnNode(t, rank1, "kill the headless rank", `pkill -KILL -f '[v]llm serve' ; pkill -KILL -f '[V]LLM::'
for i in $(seq 50); do pgrep -f '[v]llm serve|[V]LLM::' >/dev/null || exit 0; sleep 0.2; done
echo "the headless rank still runs after SIGKILL:" >&2; pgrep -af '[v]llm serve|[V]LLM::' >&2; exit 1`)
			},
			Config: unsupervised,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(mpAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
			}},
			Check: resource.ComposeTestCheckFunc(servesChat(), ranksRunAsDeclared(t, l, ports)),
		},
	)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(s *terraform.State) error {
			if err := noVLLMLeft(l)(s); err != nil {
				return err
			}
			return noUnits(t, l, unit)(s)
		},
		Steps: steps,
	})
	release()
}

// mpCanary is the mp deployment's API key in its acceptance test: a value
// the test looks for in state, argv and the units, where it must not be.
const mpCanary = "mp-canary-5c1d2e"

// servesChat asks rank 0's endpoint for a completion with the key, and
// checks one without it is refused.
func servesChat() resource.TestCheckFunc {
	return func(s *terraform.State) error {
		endpoint := s.RootModule().Resources[mpAddr].Primary.Attributes["endpoint"]
		if code, body, err := chat(endpoint, mpCanary); err != nil || code != 200 || !strings.Contains(body, "chat.completion") {
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

// serveAgainBound bounds how long a supervised deployment may take to
// serve again by itself, after a crash or a restart of a node: systemd's
// 10 s between tries, then vLLM's start on the lab's CPU build (about
// 40-70 s for the tiny model at TP=2; more beside another lane's work).
const serveAgainBound = 5 * time.Minute

// userSystemctl runs systemctl for the SSH user's own manager, as the
// provider does over SSH without PAM.
const userSystemctl = `export XDG_RUNTIME_DIR=/run/user/$(id -u); `

// unitsInstalled looks at the nodes: each rank's unit is an enabled user
// unit of the SSH user, active, whose file (which any local user can read
// through systemctl) holds no secret, with its environment file 0600 and
// what it runs 0700 in the user's state directory.
func unitsInstalled(t *testing.T, l *lab.File, unit, secret string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, n := range l.Nodes[:2] {
			out := acctest.OnNodeAs(t, n, l.SSHUser, "read the unit", userSystemctl+`f=$HOME/.config/systemd/user/$1
systemctl --user is-enabled "$1"; systemctl --user is-active "$1"
d=$(sed -n 's/^WorkingDirectory=//p' "$f"); echo "dir=$d"
stat -c '%n %a' "$d/env" "$d/run"
if grep -qF -- "$2" "$f" "$d/run"; then echo SECRET-IN-UNIT; fi`, unit, secret)
			for _, want := range []string{"enabled", "active", "/.local/state/terraform-provider-spark/vllm-", "/env 600", "/run 700"} {
				if !strings.Contains(out, want) {
					return fmt.Errorf("%s on %s: want %q in\n%s", unit, n.Name, want, out)
				}
			}
			if strings.Contains(out, "SECRET-IN-UNIT") || strings.Contains(out, "inactive") {
				return fmt.Errorf("%s on %s:\n%s", unit, n.Name, out)
			}
		}
		return nil
	}
}

// noUnits looks at the nodes: neither the unit's file nor a unit of that
// name is left in the SSH user's manager.
func noUnits(t *testing.T, l *lab.File, unit string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, n := range l.Nodes[:2] {
			out := acctest.OnNodeAs(t, n, l.SSHUser, "look for the units", userSystemctl+
				`ls "$HOME/.config/systemd/user/$1" 2>/dev/null; systemctl --user list-units --all --no-legend "$1" 2>/dev/null`, unit)
			if strings.TrimSpace(out) != "" {
				return fmt.Errorf("a unit is left on %s:\n%s", n.Name, out)
			}
		}
		return nil
	}
}
