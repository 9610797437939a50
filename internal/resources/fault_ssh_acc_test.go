package resources_test

import (
	"context"
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
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

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
