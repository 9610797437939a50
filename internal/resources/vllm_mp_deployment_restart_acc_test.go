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

// serveAgainBound bounds how long a supervised deployment may take to
// serve again by itself, after a crash or a restart of a node: systemd's
// 10 s between tries, then vLLM's start on the lab's CPU build (about
// 40-70 s for the tiny model at TP=2; more beside another lane's work).
const serveAgainBound = 5 * time.Minute

// userSystemctl runs systemctl for the SSH user's own manager, as the
// provider does over SSH without PAM.
const userSystemctl = `export XDG_RUNTIME_DIR=/run/user/$(id -u); `

// The deployment under systemd (restart = "always"), as the ordinary SSH
// user, whose manager lingers on the lab's nodes: refused at plan for the
// second user, who does not linger (D34), and nothing starts; installed as
// user units that carry no secret; vLLM killed comes back by itself and
// serves a real completion, and the plan afterwards reports the restart as
// a warning and plans nothing; the same after rank 0's whole node restarts;
// a unit changed by hand is drift the apply repairs; destroy leaves no
// unit and no vLLM.
func TestAccVLLMMPDeployment_survivesCrashAndRestart(t *testing.T) {
	l := acctest.Lab(t)
	rank0, rank1 := l.Nodes[0], l.Nodes[1]
	r := newRefusals(t, l)
	ports := fabricPorts(t, l)
	const canary = "mp-restart-canary-9a7f"
	key := keySetup(t, l, rank0, canary)
	vars := ""
	if strings.Contains(key, "var.vllm_api_key") {
		vars = "variable \"vllm_api_key\" {\n  type      = string\n  sensitive = true\n}\n"
	}
	supervised := vars + mpDeploy{keyLine: key, restart: "always"}.config(l, ports)
	unit := fmt.Sprintf("spark-vllm-mp-%s-8000.service", rank0.FabricIP)
	// The plan's warnings are read from its log: the testing framework
	// does not hand them to a step.
	logFile := filepath.Join(t.TempDir(), "trace.log")
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_LOG_PATH", logFile)
	warned := func(what string, since int64) {
		t.Helper()
		b, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		// The warning's detail; its summary is "systemd restarted vLLM since the apply".
		re := regexp.MustCompile(`rank 0 on ` + rank0.Name + ` was restarted by systemd`)
		if !re.Match(b[min(since, int64(len(b))):]) {
			t.Fatalf("after %s, the plan did not warn that systemd restarted rank 0 (log %s)", what, logFile)
		}
	}
	logSize := func() int64 {
		fi, err := os.Stat(logFile)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	var mark int64
	endpoint := "http://" + rank0.SSHHost + ":8000/v1"
	// Each step that breaks the set waits, bounded, for a completion
	// through the endpoint, with no apply in between.
	servesAgain := func(what string) {
		t.Helper()
		start := time.Now()
		for time.Since(start) < serveAgainBound {
			if code, body, err := chat(endpoint, canary); err == nil && code == 200 && strings.Contains(body, "chat.completion") {
				t.Logf("after %s, served a completion again by itself in %.0f s", what, time.Since(start).Seconds())
				mark = logSize()
				return
			}
			time.Sleep(2 * time.Second)
		}
		t.Fatalf("after %s, no completion through %s within %s", what, endpoint, serveAgainBound)
	}
	rank0ID := tfjsonpath.New("nodes").AtMapKey(rank0.Name).AtMapKey("process_identity")
	newProcess := statecheck.CompareValue(compare.ValuesDiffer())
	steps := r.steps(resource.TestStep{
		// The second user's manager does not linger: its units would not
		// start at boot. Refused, naming the fix.
		Config: vars + mpDeploy{keyLine: key, restart: "always", user: l.SecondSSHUser}.config(l, ports),
		ExpectError: regexp.MustCompile(`(?s)vLLM cannot be supervised on ` + rank0.Name + `.*does not linger.*sudo loginctl\s+enable-linger\s+` +
			l.SecondSSHUser + `.*Rule D34`),
	})
	steps = append(steps,
		r.then(resource.TestStep{
			Config: supervised,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(mpAddr, plancheck.ResourceActionCreate),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("restart"), knownvalue.StringExact("always")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				newProcess.AddStateValue(mpAddr, rank0ID),
			},
			Check: resource.ComposeTestCheckFunc(servesChat(canary), ranksRunAsDeclared(t, l, ports), keyNowhere(t, l, canary),
				unitsInstalled(t, l, unit, canary)),
		}),
		resource.TestStep{
			// vLLM crashes on rank 0: systemd starts it again; the plan
			// warns and plans nothing.
			PreConfig: func() {
				acctest.OnNode(t, rank0, "kill rank 0's vllm serve", `pkill -KILL -u "$1" -f '[v]llm serve'`, l.SSHUser)
				servesAgain("rank 0's vllm serve was killed")
			},
			Config:           supervised,
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
			Config:           supervised,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				newProcess.AddStateValue(mpAddr, rank0ID),
			},
			Check: func(*terraform.State) error { warned("the restart of "+rank0.Name, mark); return nil },
		},
		resource.TestStep{
			// A unit edited by hand (its process still runs): drift, which
			// the apply repairs by writing the unit again.
			PreConfig: func() {
				acctest.OnNodeAs(t, rank1, l.SSHUser, "edit rank 1's unit by hand", userSystemctl+
					`f=$HOME/.config/systemd/user/$1; sed -i 's/^RestartSec=10$/RestartSec=1/' "$f" && grep -q '^RestartSec=1$' "$f" && systemctl --user daemon-reload`, unit)
			},
			Config: supervised,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(mpAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(mpAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
			}},
			Check: resource.ComposeTestCheckFunc(servesChat(canary), unitsInstalled(t, l, unit, canary)),
		},
	)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(s *terraform.State) error {
			if err := noVLLMLeft(l)(s); err != nil {
				return err
			}
			for _, n := range l.Nodes[:2] {
				out := acctest.OnNodeAs(t, n, l.SSHUser, "look for the units", userSystemctl+
					`ls "$HOME/.config/systemd/user/$1" 2>/dev/null; systemctl --user list-units --all --no-legend "$1" 2>/dev/null`, unit)
				if strings.TrimSpace(out) != "" {
					return fmt.Errorf("a unit is left on %s after destroy:\n%s", n.Name, out)
				}
			}
			return nil
		},
		Steps: steps,
	})
}

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
