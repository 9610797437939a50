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

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// hideIP takes iproute2 away on a node (Ray does not use it; the plan's
// node facts do) and returns how to put it back.
func hideIP(t *testing.T, n lab.Node) func() {
	t.Helper()
	ctx := context.Background()
	if p := acctest.OnNode(t, n, "hide ip", `p=$(readlink -f "$(command -v ip)") && mv "$p" "$p.hidden" && ! ip -V >/dev/null 2>&1 && echo "$p"`); p == "" {
		t.Fatalf("hide ip on %s: no path printed", n.Name)
	}
	return func() {
		if out, err := lab.Exec(ctx, n, "sh", "-c", `for d in /usr/sbin /sbin /usr/bin /bin; do [ -e "$d/ip.hidden" ] && mv "$d/ip.hidden" "$d/ip"; done; command -v ip`); err != nil {
			t.Errorf("restore ip on %s: %v %s", n.Name, err, out)
		}
	}
}

// A worker that cannot be reached at all does not hold a destroy hostage:
// the head is stopped, the worker is warned about, and Ray on the worker,
// cut off from its head, stops by itself.
func TestAccRayCluster_destroyWithUnreachableWorker(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	ctx := context.Background()
	// On the fabric, Ray does not notice the worker's external (SSH) network going.
	config := rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: w.FabricIP}}.config(l)
	cut := false
	t.Cleanup(func() {
		if cut {
			if err := lab.Connect(ctx, w, lab.ExternalNetwork); err != nil {
				t.Errorf("reconnect %s: %v", w.Name, err)
			}
		}
		// The token the provider wrote on the worker stayed: it could not
		// be reached (the warning says so). The operator's hand, as told.
		_, _ = lab.ExecAs(ctx, w, l.SSHUser, "sh", "-c", `rm -f "$HOME/.ray/auth_token" "$HOME/.ray/auth_token.terraform-provider-spark"`)
	})
	stopsByItself := func(*terraform.State) error {
		if err := rayGone(l, head, "after destroy"); err != nil {
			return err
		}
		// The worker's raylet gives up on the GCS after
		// gcs_rpc_server_reconnect_timeout_s (60 s): wait, bounded.
		deadline := time.Now().Add(150 * time.Second)
		for {
			out, err := acctest.Running(w, acctest.RayDaemons)
			if err == nil && out == "" {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("Ray still running on the unreachable worker %s 150 s after its head stopped: %w\n%s", w.Name, err, out)
			}
			time.Sleep(5 * time.Second)
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		// The destroy step checks the nodes: a case's CheckDestroy runs only
		// when state is left after the last step, which a destroy step empties.
		CheckDestroy: stopsByItself,
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig: func() {
					if err := lab.Disconnect(ctx, w, lab.ExternalNetwork); err != nil {
						t.Fatal(err)
					}
					cut = true
				},
				Config:  config,
				Destroy: true,
				Check:   stopsByItself,
			},
		},
	})
}

// A node that stops answering (frozen: its processes paused, its kernel
// still accepting TCP) never hangs a plan: the SSH handshake is bounded by
// connect_timeout and the error names the node and the step. A plan that
// starts nothing goes through with a warning; one that would restart the
// frozen worker is refused. Nothing starts, and thawed, the plan is clean.
func TestAccRayCluster_frozenNodeDuringPlan(t *testing.T) {
	l := acctest.Lab(t)
	w := l.Nodes[1]
	ctx := context.Background()
	base := rayCluster{workers: map[string]string{w.Name: ""}}.config(l)
	relabelled := rayCluster{workers: map[string]string{w.Name: ""}, workerLines: []string{rackLabel}}.config(l)
	frozen := false
	thaw := func() {
		if frozen {
			if _, err := lab.Pause(ctx, w, false); err != nil {
				t.Errorf("unpause %s: %v", w.Name, err)
			}
			frozen = false
		}
	}
	t.Cleanup(thaw)
	var before string
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{Config: base},
			{
				PreConfig: func() {
					before = acctest.Snapshot(t, l, acctest.RayDaemons, acctest.VLLMServe)
					if _, err := lab.Pause(ctx, w, true); err != nil {
						t.Fatal(err)
					}
					frozen = true
				},
				Config:   base,
				PlanOnly: true,
			},
			{
				Config:      relabelled,
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)` + regexp.QuoteMeta(w.SSHHost) + `:22: handshake`),
			},
			{
				PreConfig: func() {
					thaw()
					if after := acctest.Snapshot(t, l, acctest.RayDaemons, acctest.VLLMServe); after != before {
						t.Fatalf("plans against a frozen node started or stopped something.\nbefore:\n%s\nafter:\n%s", before, after)
					}
				},
				Config:   base,
				PlanOnly: true,
			},
		},
	})
}

// A worker's fabric port at another MTU than the head's is a warning at
// plan (D33), the plan passing and empty. Set down under a cluster that
// runs on the fabric, the port is refused at plan (D33), and nothing starts. Then its link goes: once
// the head has marked the worker dead, the plan wants it back and names
// why it cannot: its node_ip is no longer on the node; refused at plan,
// nothing starts, and the way to destroy anyway is given. With the link
// back, the same configuration applies and the worker rejoins.
func TestAccRayCluster_fabricLinkDown(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	ctx := context.Background()
	config := rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: w.FabricIP}}.config(l)
	down := false
	t.Cleanup(func() {
		if down {
			_ = lab.Connect(context.Background(), w, lab.FabricNetwork)
		}
	})
	// The worker's cut-off raylet exits by itself a minute after its head
	// marked it dead, so what the refused plan must not have changed is the
	// head's Ray, and no new raylet on the worker: the pids of Ray's daemons.
	pids := func(n lab.Node) string { return acctest.PIDs(acctest.RunningOrFail(t, n, acctest.RayDaemons)) }
	var headBefore, workerBefore string
	port, err := lab.FabricInterface(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	portDown := false
	mtu := strings.TrimSpace(acctest.OnNode(t, w, "read the fabric port's MTU", `cat "/sys/class/net/$1/mtu"`, port))
	t.Cleanup(func() {
		_, _ = lab.Exec(context.Background(), w, "ip", "link", "set", port, "mtu", mtu)
		if portDown {
			_, _ = lab.Exec(context.Background(), w, "ip", "link", "set", port, "up")
		}
	})
	// The plan's warnings are read from its log: the testing framework
	// does not hand them to a step.
	logFile := filepath.Join(t.TempDir(), "trace.log")
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_LOG_PATH", logFile)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{Config: config},
			{
				// The worker's port at MTU 9000, the head's at the lab's: a
				// warning, not a refusal (TCP and NCCL settle on the smaller
				// MTU, and the pair serves), so the plan passes, empty.
				PreConfig: func() {
					headBefore, workerBefore = pids(head), pids(w)
					acctest.OnNode(t, w, "set the fabric port's MTU to 9000", `ip link set "$1" mtu 9000`, port)
				},
				Config:   config,
				PlanOnly: true,
			},
			{
				// Then the port alone, set down (the interface and its
				// address stay, as a pulled cable leaves them): D33 refuses
				// at plan, naming the port, and nothing starts.
				PreConfig: func() {
					b, err := os.ReadFile(logFile)
					if err != nil {
						t.Fatal(err)
					}
					if !acctest.Warned(b, "The two ends of the fabric have different MTUs", port+" on "+w.Name+" has MTU 9000") {
						t.Fatalf("the plan did not warn that %s on %s has MTU 9000, the head's port %s (log %s)", port, w.Name, mtu, logFile)
					}
					acctest.OnNode(t, w, "set the fabric port's MTU back", `ip link set "$1" mtu "$2"`, port, mtu)
					if now := pids(head) + "|" + pids(w); now != headBefore+"|"+workerBefore {
						t.Fatalf("the plan that warned of the MTUs changed Ray's daemons.\nbefore: %s | %s\nafter: %s", headBefore, workerBefore, now)
					}
					acctest.OnNode(t, w, "set the fabric port down", "ip link set \"$1\" down", port)
					portDown = true
				},
				Config:   config,
				PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)The fabric port is down.*` + regexp.QuoteMeta(port) + `\s+on\s+node\s+` + w.Name +
					`\s+carries\s+` + regexp.QuoteMeta(w.FabricIP) + `.*ip\s+link\s+set\s+` + regexp.QuoteMeta(port) + `\s+up.*Rule\s+D33`),
			},
			{
				// At once, while Ray still counts the worker alive: the plan
				// starts nothing, and still fails (it used to say "No changes").
				PreConfig: func() {
					if now := pids(head) + "|" + pids(w); now != headBefore+"|"+workerBefore {
						t.Fatalf("the plan refused for the port changed Ray's daemons.\nbefore: %s | %s\nafter: %s", headBefore, workerBefore, now)
					}
					acctest.OnNode(t, w, "set the fabric port up", "ip link set \"$1\" up", port)
					portDown = false
					if err := lab.Disconnect(ctx, w, lab.FabricNetwork); err != nil {
						t.Fatal(err)
					}
					down = true
				},
				Config:   config,
				PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)The address Ray registered for a node is no longer on it.*node:` + regexp.QuoteMeta(w.FabricIP) +
					`.*terraform\s+destroy\s+-refresh=false`),
			},
			{
				PreConfig: func() {
					waitNodeDead(t, l, w)
					headBefore, workerBefore = pids(head), pids(w)
				},
				Config:   config,
				PlanOnly: true,
				// The testing framework plans without a refresh first (the
				// state still has the worker alive: the address is gone), then
				// with one (Ray has marked it dead: node_ip is not on it).
				ExpectError: regexp.MustCompile(`(?s)(node_ip is not an address of this node|The address Ray registered for a node is no longer on it).*` + regexp.QuoteMeta(w.FabricIP) +
					`.*terraform\s+destroy\s+-refresh=false`),
			},
			{
				PreConfig: func() {
					if now := pids(head); now != headBefore {
						t.Fatalf("the refused plan changed Ray on the head.\nbefore:\n%s\nafter:\n%s", headBefore, now)
					}
					for _, p := range strings.Fields(pids(w)) {
						if !strings.Contains(" "+strings.Join(strings.Fields(workerBefore), " ")+" ", " "+p+" ") {
							t.Fatalf("the refused plan started Ray on %s: pid %s (before: %q)", w.Name, p, workerBefore)
						}
					}
					if err := lab.Connect(ctx, w, lab.FabricNetwork); err != nil {
						t.Fatal(err)
					}
					down = false
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionUpdate),
				}, PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("registered_ip"), knownvalue.StringExact(w.FabricIP)),
				},
			},
		},
	})
}

// waitNodeDead waits (bounded) until the head's GCS has marked n dead
// (about a minute after n's link went: Ray's health checks). It reads the
// GCS's node table as the provider does, without a driver, which would
// need the head's own raylet.
func waitNodeDead(t *testing.T, l *lab.File, n lab.Node) {
	t.Helper()
	ctx := context.Background()
	head := l.Nodes[0]
	for deadline := time.Now().Add(150 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		out, err := lab.ExecAs(ctx, head, l.SSHUser, "sh", "-c", ray.AuthEnv+`; exec "$0" -c "$1" "$2"`, head.PythonCommand, ray.NodesScript, head.FabricIP+":6379")
		if err != nil {
			continue
		}
		tab, err := ray.ParseNodes(out)
		if err != nil || !tab.GCSUp {
			continue
		}
		_, onFabric := tab.Alive(n.FabricIP)
		_, onExternal := tab.Alive(n.ExternalIP)
		if !onFabric && !onExternal {
			return
		}
	}
	t.Fatalf("within 150 s, the head did not mark %s dead", n.Name)
}
