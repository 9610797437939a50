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
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
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

// A check that fails on a cluster the plan leaves as it is warns instead of
// failing: a plan (and so the refresh `terraform destroy` starts with) goes
// through; a plan that would start something is still refused, and its error
// says how to destroy anyway.
func TestAccRayCluster_failingCheckDoesNotBlockAnUnchangedCluster(t *testing.T) {
	l := acctest.Lab(t)
	w := l.Nodes[1]
	base := rayCluster{workers: map[string]string{w.Name: ""}}.config(l)
	relabelled := rayCluster{workers: map[string]string{w.Name: ""}, workerLines: []string{rackLabel}}.config(l)
	var restore func()
	t.Cleanup(func() {
		if restore != nil {
			restore()
		}
	})
	r := newRefusals(t, l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: append([]resource.TestStep{
			{Config: base},
			{
				// Nothing to start: the broken facts read is a warning and
				// the plan is empty (PlanOnly fails on any change or error).
				PreConfig: func() { restore = hideIP(t, w) },
				Config:    base,
				PlanOnly:  true,
			},
		}, append(r.steps(resource.TestStep{
			// Restarting the worker needs its facts: refused, with the way to destroy anyway.
			Config:      relabelled,
			ExpectError: regexp.MustCompile(`(?s)printed no interfaces.*terraform\s+destroy\s+-refresh=false`),
		}), r.then(resource.TestStep{
			// iproute2 back: the plan is clean again and empty.
			PreConfig: func() { restore(); restore = nil },
			Config:    base,
			PlanOnly:  true,
		}))...),
	})
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

// Another local user who made the provider's per-user directory first (in
// /tmp anyone can) gets nothing: the apply fails naming the directory and
// its owner, no key is written there, nothing starts; with the directory
// gone, the same apply serves.
func TestAccVLLMDeployment_secondLocalUserCannotPlantTheDirectory(t *testing.T) {
	l := acctest.Lab(t)
	head := l.Nodes[0]
	ctx := context.Background()
	cluster := rayCluster{}.config(l)
	canary := "canary-key-" + fmt.Sprint(time.Now().UnixNano())
	d := deploy{hostIP: head.ExternalIP, keyLine: keySetup(t, l, head, canary)}
	planted := ""
	plant := func() {
		planted = acctest.OnNode(t, head, "plant the directory", `id intruder >/dev/null 2>&1 || useradd -M intruder
d=/tmp/terraform-provider-spark-$(id -u "$1"); rm -rf "$d"; install -d -m 0777 -o intruder "$d" && echo "$d"`, l.SSHUser)
	}
	t.Cleanup(func() {
		if planted != "" {
			_, _ = lab.Exec(ctx, head, "rm", "-rf", planted)
		}
	})
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: []resource.TestStep{
			{Config: cluster},
			{
				PreConfig:   plant,
				Config:      cluster + d.config(l),
				ExpectError: regexp.MustCompile(`(?s)terraform-provider-spark-\d+\s+is\s+not\s+a\s+directory\s+owned\s+by\s+` + l.SSHUser + `.*intruder`),
			},
			{
				// Nothing was written into the planted directory and nothing started;
				// the owner removes it, and the same configuration serves.
				PreConfig: func() {
					if out := acctest.OnNode(t, head, "look into the planted directory and for vLLM", `find "$1" -mindepth 1; `+string(acctest.VLLMServe)+`; true`, planted); out != "" {
						t.Fatalf("the refused apply wrote into the planted directory or started vLLM:\n%s", out)
					}
					if _, err := lab.Exec(ctx, head, "rm", "-rf", planted); err != nil {
						t.Fatal(err)
					}
					planted = ""
				},
				Config: cluster + d.config(l),
				Check:  resource.TestCheckResourceAttr(deployAddr, "status", "serving"),
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

// A create killed before it could roll back (a second Ctrl-C, SIGKILL, a
// lost laptop) leaves Ray on the head and nothing in state. Found with its
// start marker, it is this provider's orphan: the plan says so and the
// apply replaces it. The same Ray without the marker is someone else's:
// refused at plan, untouched.
func TestAccRayCluster_orphanOfAKilledCreateIsReplaced(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	ctx := context.Background()
	config := rayCluster{workers: map[string]string{w.Name: ""}}.config(l)
	handStart := func() {
		acctest.OnNodeAs(t, head, l.SSHUser, "start Ray by hand", `"$1" start --head --port 6379 --disable-usage-stats >/dev/null 2>&1 && pgrep -x gcs_server`, head.RayCommand)
	}
	marker := `/tmp/terraform-provider-spark-$(id -u)/ray-6379.starting`
	t.Cleanup(func() {
		_, _ = lab.ExecAs(ctx, head, l.SSHUser, "sh", "-c", `"$1" stop --force >/dev/null 2>&1; rm -f `+marker, "sh", head.RayCommand)
	})
	r := newRefusals(t, l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: append(r.steps(resource.TestStep{
			// Someone's Ray on the port, no marker: refused, left alone.
			PreConfig:   handStart,
			Config:      config,
			ExpectError: regexp.MustCompile(`(?s)GCS port is already in use on the head.*gcs_server`),
		}), r.then(resource.TestStep{
			// What a killed create leaves: its marker beside its Ray.
			PreConfig: func() {
				acctest.OnNodeAs(t, head, l.SSHUser, "write the marker", `d=/tmp/terraform-provider-spark-$(id -u); mkdir -p -m 700 "$d" &&
					echo "terraform-provider-spark pid 4242 on killed-laptop since 2026-12-03T08:00:00Z" > "$d/ray-6379.starting"`)
			},
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head").AtMapKey("registered_ip"), knownvalue.StringExact(head.ExternalIP)),
				statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
			},
			Check: func(*terraform.State) error {
				// The finished create removed its marker.
				out, err := lab.ExecAs(ctx, head, l.SSHUser, "sh", "-c", `ls `+marker+` 2>/dev/null; true`)
				if err != nil || strings.TrimSpace(out) != "" {
					return fmt.Errorf("the start marker is still there after a finished create: %q %w", out, err)
				}
				return nil
			},
		})),
	})
}

// A port another program holds is refused at plan, naming the program:
// vllm serve binds it only after loading the model, and the readiness gate
// would otherwise talk to whatever holds it. Freed, the same apply serves.
func TestAccVLLMDeployment_portHeldRefusedAtPlan(t *testing.T) {
	l := acctest.Lab(t)
	head := l.Nodes[0]
	ctx := context.Background()
	cluster := rayCluster{}.config(l)
	d := deploy{hostIP: head.ExternalIP, keyLine: keySetup(t, l, head, "canary-key-"+fmt.Sprint(time.Now().UnixNano()))}
	stopSquatter := func() {
		_, _ = lab.Exec(ctx, head, "sh", "-c", "pkill -f '[h]ttp.server 8000'; true")
	}
	t.Cleanup(stopSquatter)
	r := newRefusals(t, l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: append(append([]resource.TestStep{{Config: cluster}}, r.steps(resource.TestStep{
			PreConfig: func() {
				// Another program of the same SSH user (another user's would
				// show in ss without its name: "a process this user cannot see").
				acctest.OnNodeAs(t, head, l.SSHUser, "hold port 8000", `setsid python3 -m http.server 8000 >/dev/null 2>&1 </dev/null &
for i in $(seq 50); do ss -Hltn 'sport = :8000' | grep -q . && exit 0; sleep 0.2; done; echo "not listening" >&2; exit 1`)
			},
			Config:      cluster + d.config(l),
			ExpectError: regexp.MustCompile(`(?s)vLLM port is already in use on the head.*port = 8000.*python3`),
		})...), r.then(resource.TestStep{
			PreConfig: stopSquatter,
			Config:    cluster + d.config(l),
			Check:     resource.TestCheckResourceAttr(deployAddr, "status", "serving"),
		})),
	})
}

// otherUsersRay starts a Ray of another local user on every node (its own
// head, its own ports and temp dir, as a second team sharing the boxes
// would) and returns what identifies it: its pids, listed by owner.
func otherUsersRay(t *testing.T, l *lab.File) func(n lab.Node) string {
	t.Helper()
	ctx := context.Background()
	list := func(n lab.Node) string {
		return acctest.PIDs(acctest.RunningOrFail(t, n, acctest.RayDaemonsOf("intruder")))
	}
	for _, n := range l.Nodes {
		acctest.OnNode(t, n, "start intruder's Ray", `id intruder >/dev/null 2>&1 || useradd -M intruder
pkill -KILL -u intruder; sleep 1; rm -rf /tmp/ray-intruder
su -s /bin/sh intruder -c 'cd /tmp && HOME=/tmp/intruder-home setsid "$0" start --head --port 6390 --temp-dir /tmp/ray-intruder \
  --ray-client-server-port 10091 --min-worker-port 20002 --max-worker-port 29999 --dashboard-port 8290 \
  --dashboard-agent-listen-port 52390 --disable-usage-stats >/tmp/intruder-ray.log 2>&1' "$1" </dev/null || { tail -5 /tmp/intruder-ray.log; exit 1; }`, n.RayCommand)
		if len(strings.Fields(list(n))) != 2 {
			t.Fatalf("intruder's Ray on %s: want a gcs_server and a raylet, got pids %q", n.Name, list(n))
		}
	}
	t.Cleanup(func() {
		for _, n := range l.Nodes {
			_, _ = lab.Exec(ctx, n, "sh", "-c", `pkill -KILL -u intruder; rm -rf /tmp/ray-intruder /tmp/intruder-home; true`)
		}
	})
	return list
}

// Ray's own `ray stop` ends every Ray on the node, other users' too when
// run as root. The provider stops its own cluster only: another user's Ray
// on the same nodes keeps running, the same processes, through a worker's
// removal and the destroy.
func TestAccRayCluster_anotherUsersRayOutlivesDestroy(t *testing.T) {
	l := acctest.Lab(t)
	w := l.Nodes[1]
	theirs := otherUsersRay(t, l)
	before := map[string]string{}
	for _, n := range l.Nodes {
		before[n.Name] = theirs(n)
	}
	untouched := func(*terraform.State) error {
		for _, n := range l.Nodes {
			if now := theirs(n); now != before[n.Name] {
				return fmt.Errorf("the other user's Ray on %s changed: pids %q, then %q", n.Name, before[n.Name], now)
			}
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(s *terraform.State) error {
			for _, n := range l.Nodes {
				out, err := acctest.Running(n, acctest.RayDaemonsOf(l.SSHUser))
				if err != nil || strings.TrimSpace(out) != "" {
					return fmt.Errorf("this cluster's Ray still runs on %s after destroy (%w):\n%s", n.Name, err, out)
				}
			}
			return untouched(s)
		},
		Steps: []resource.TestStep{
			{Config: rayCluster{workers: map[string]string{w.Name: ""}}.config(l), Check: untouched},
			{Config: rayCluster{}.config(l), Check: untouched}, // the worker removed: its Ray stopped there
		},
	})
}

// A create killed while vLLM loaded (SIGKILL, a lost laptop) leaves vllm
// serve running with its start marker and holding its GPU, and nothing in
// state. The next plan recognises it as this provider's unfinished launch
// (it does not refuse the port or the GPU it holds); the apply stops it and
// serves its own, and the marker is gone.
func TestAccVLLMDeployment_unfinishedLaunchIsReplaced(t *testing.T) {
	l := acctest.Lab(t)
	head := l.Nodes[0]
	ctx := context.Background()
	cluster := rayCluster{}.config(l)
	d := deploy{hostIP: head.ExternalIP, keyLine: keySetup(t, l, head, "canary-key-"+fmt.Sprint(time.Now().UnixNano()))}
	orphan := ""
	leave := func() {
		// What Server.Launch does, by hand, the way a killed apply leaves it.
		env := fmt.Sprintf("RAY_ADDRESS='%s:6379'\nVLLM_HOST_IP='%s'\nVLLM_CPU_KVCACHE_SPACE='1'\nHF_HUB_OFFLINE='1'\n", head.ExternalIP, head.ExternalIP)
		argv := vllm.ServeArgv(vllm.ServeOptions{Command: head.VLLMCommand, Model: head.ModelPath, ServedName: "tiny", TP: 1, PP: 1, Port: 8000,
			ExtraArgs: []string{"--dtype", "float32", "--max-model-len", "256", "--enforce-eager"}})
		script := `d=/tmp/terraform-provider-spark-$(id -u); mkdir -p -m 700 "$d/vllm-8000" && printf '%s' "$1" > "$d/vllm-8000/env" && shift &&
exec sh -c "$0" sh "$d/vllm-8000" "" "terraform-provider-spark pid 4242 on killed-laptop since 2026-12-03T08:00:00Z" "$@"`
		out, err := lab.ExecAs(ctx, head, l.SSHUser, append([]string{"sh", "-c", script, vllm.LaunchScript, env}, argv...)...)
		if err != nil {
			t.Fatalf("leave an unfinished launch: %v %s", err, out)
		}
		orphan = strings.TrimSpace(out)
		// Bounded: until it serves and so holds its GPU for sure.
		for i := 0; i < 180; i++ {
			if out, _ := lab.Exec(ctx, head, "sh", "-c", "ss -Hltn 'sport = :8000'"); strings.TrimSpace(out) != "" {
				return
			}
			time.Sleep(time.Second)
		}
		t.Fatal("the unfinished launch's vllm serve never listened on 8000")
	}
	t.Cleanup(func() {
		if orphan != "" {
			_, _ = lab.Exec(ctx, head, "sh", "-c", vllm.StopScript, "sh", orphan, "8000", "5", "")
		}
	})
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: []resource.TestStep{
			{Config: cluster},
			{
				PreConfig: leave,
				Config:    cluster + d.config(l),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				},
				Check: func(s *terraform.State) error {
					id := s.RootModule().Resources[deployAddr].Primary.Attributes["process_identity"]
					if id == orphan {
						return fmt.Errorf("the unfinished launch's server %s was adopted, not replaced", orphan)
					}
					out, err := lab.ExecAs(ctx, head, l.SSHUser, "sh", "-c", vllm.StatusScript+`; ls /tmp/terraform-provider-spark-$(id -u)/vllm-8000/starting 2>/dev/null; true`, "sh", orphan)
					if err != nil || strings.TrimSpace(out) != "gone" {
						return fmt.Errorf("after the apply, the unfinished launch's server or the start marker is still there: %q %w", out, err)
					}
					orphan = ""
					return nil
				},
			},
		},
	})
}

// A worker's fabric link goes down under a cluster that runs on the
// fabric. Once the head has marked the worker dead, the plan wants it back
// and names why it cannot: its node_ip is no longer on the node; refused
// at plan, nothing starts, and the way to destroy anyway is given. With the
// link back, the same configuration applies and the worker rejoins.
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
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{Config: config},
			{
				// At once, while Ray still counts the worker alive: the plan
				// starts nothing, and still fails (it used to say "No changes").
				PreConfig: func() {
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

// The SSH sessions to a worker are killed while its ray start runs (sshd
// restarted, a firewall dropping connections): the apply fails naming the
// worker, and rolls back over a fresh connection, so nothing runs on any
// node, not even a ray start still under way nor the auth token it wrote.
// The same apply then converges. Then the same on an update that adds the
// worker to a running head: the worker it started is stopped again over a
// fresh connection (a stop sent on the killed one fails at once, and the
// unfinished ray start goes on to start a raylet that holds the ports the
// next apply's raylet needs), the head keeps running, state keeps the
// cluster as it was, and the next apply converges.
func TestAccRayCluster_sshSessionsKilledMidApply(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	ctx := context.Background()
	config := rayCluster{workers: map[string]string{w.Name: ""}}.config(l)
	headOnly := rayCluster{}.config(l)
	killed := make(chan bool, 1)
	killWhileStarting := func() {
		go func() {
			for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				out, _ := lab.Exec(ctx, w, "sh", "-c", `pgrep -f '(^|/)ray start( |$)' >/dev/null || exit 0; pkill -KILL -f '^sshd(-session)?: [^ ]+@' && echo killed`)
				if strings.TrimSpace(out) == "killed" {
					killed <- true
					return
				}
			}
			killed <- false
		}()
	}
	wasKilled := func() {
		if !<-killed {
			t.Fatal("the worker's ray start was never seen: the sessions were not killed mid-apply")
		}
	}
	var headBefore string
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{
				PreConfig:   killWhileStarting,
				Config:      config,
				ExpectError: regexp.MustCompile(`(?s)Cannot start Ray worker.*` + regexp.QuoteMeta(w.SSHHost)),
			},
			{
				PreConfig: func() {
					wasKilled()
					for _, n := range []lab.Node{head, w} {
						if err := rayGone(l, n, "after the failed create"); err != nil {
							t.Fatal(err)
						}
					}
				},
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
				},
			},
			{Config: headOnly}, // the worker removed
			{
				PreConfig: func() {
					headBefore = acctest.RunningOrFail(t, head, acctest.RayletUser)
					killWhileStarting()
				},
				Config:      config, // the worker added back: an update, killed mid-start
				ExpectError: regexp.MustCompile(`(?s)Cannot start Ray worker.*` + regexp.QuoteMeta(w.SSHHost)),
			},
			{
				PreConfig: func() {
					wasKilled()
					if err := rayGone(l, w, "after the failed update that added it"); err != nil {
						t.Fatal(err)
					}
					if after := acctest.RunningOrFail(t, head, acctest.RayletUser); after != headBefore || after == "" {
						t.Fatalf("the failed update touched the head: raylet %q -> %q", headBefore, after)
					}
				},
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionUpdate), // state kept the cluster as it was
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
				},
			},
		},
	})
}

// A worker comes back with a new host key (re-imaged, or someone in the
// middle). With the strict policy nothing is sent to it and every plan
// fails, as OpenSSH refuses the connection: one that starts nothing too, so
// a scheduled `plan -detailed-exitcode` sees it (it used to pass with a
// warning and exit 0), naming the host and the new key's fingerprint, with
// the way to destroy anyway. Once the operator has accepted the new key, the
// same change applies.
func TestAccRayCluster_hostKeyChanged(t *testing.T) {
	l := acctest.Lab(t)
	w := l.Nodes[1]
	known := filepath.Join(t.TempDir(), "known_hosts")
	b, err := os.ReadFile(l.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(known, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ownKnown := acctest.Provider{KnownHosts: known}
	base := rayCluster{provider: ownKnown, workers: map[string]string{w.Name: ""}}.config(l)
	relabelledWithKnown := rayCluster{provider: ownKnown, workers: map[string]string{w.Name: ""}, workerLines: []string{rackLabel}}.config(l)
	relabelled := rayCluster{workers: map[string]string{w.Name: ""}, workerLines: []string{rackLabel}}.config(l)
	var before string
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{Config: base},
			{
				PreConfig: func() {
					if _, err := lab.RegenerateHostKey(context.Background(), acctest.LabDir(), w.Name); err != nil {
						t.Fatal(err)
					}
					before = acctest.Snapshot(t, l, acctest.RayDaemons, acctest.VLLMServe)
				},
				Config:   base,
				PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)` + regexp.QuoteMeta(w.SSHHost) + `:22.*SHA256:.*host key has CHANGED.*` +
					`terraform\s+destroy\s+-refresh=false`),
			},
			{
				Config:      relabelledWithKnown,
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)` + regexp.QuoteMeta(w.SSHHost) + `:22.*SHA256:.*host key has CHANGED`),
			},
			{
				// The lab's known_hosts has the new key: accepted, the change applies.
				PreConfig: func() {
					if after := acctest.Snapshot(t, l, acctest.RayDaemons, acctest.VLLMServe); after != before {
						t.Fatalf("plans against a changed host key started or stopped something.\nbefore:\n%s\nafter:\n%s", before, after)
					}
				},
				Config: relabelled,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("labels"),
						knownvalue.MapExact(map[string]knownvalue.Check{"rack": knownvalue.StringExact("r2")})),
				},
			},
		},
	})
}

// The head's raylet dies while its GCS lives on (OOM killer, a crash).
// Still this resource's cluster: the plan replaces it, the apply stops what
// is left (the GCS holding the port) and starts it afresh, and the next
// plan is empty. Dropped from state instead, its GCS would be a Ray no
// state knows, which every later plan must refuse to touch.
func TestAccRayCluster_headRayletDies(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	config := rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: w.FabricIP}}.config(l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig: func() { killRaylet(t, l, head) },
				Config:    config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionDestroyBeforeCreate),
				}, PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head").AtMapKey("alive"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("workers").AtMapKey(w.Name).AtMapKey("alive"), knownvalue.Bool(true)),
				},
			},
		},
	})
}
