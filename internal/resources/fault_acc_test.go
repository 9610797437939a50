package resources_test

import (
	"context"
	"fmt"
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
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
)

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
