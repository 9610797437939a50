package preflight

import (
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
)

func modelTarget() ModelTarget {
	return ModelTarget{Name: "spark2", SSHHost: "10.1.230.181", Address: "192.168.200.13",
		Facts: spark("10.1.230.181", "192.168.200.13"), SourceHost: "10.1.230.180",
		SourceRoute: &nodefacts.Route{Dst: "192.168.200.13", Dev: "enP7s7", Src: "192.168.200.12"}}
}

func TestModelTargetAddress(t *testing.T) {
	if found := ModelTargetAddress(modelTarget()); len(found) != 0 {
		t.Fatalf("clean target refused: %s", allSummaries(found))
	}
	// The case: the address of another node (the source's own
	// fabric address), while the files are already there.
	m := modelTarget()
	m.Address = "192.168.200.12"
	one(t, ModelTargetAddress(m), `targets["spark2"].address = "192.168.200.12"`, "10.1.230.181", "192.168.200.13 on")
	if d := ModelTargetAddress(m)[0]; d.Warning || !d.Now || d.Rule != D22 || d.Path.String() != `targets["spark2"].address` {
		t.Fatalf("want a D22 error on targets[spark2].address that holds on a no-change plan: %+v", d)
	}
	m = modelTarget()
	m.SourceRoute = nil
	one(t, ModelTargetAddress(m), "no route", "10.1.230.180", `"192.168.200.13"`)
	m = modelTarget()
	m.SourceRoute.Gateway = "10.1.230.1"
	found := ModelTargetAddress(m)
	if len(found) != 1 || !found[0].Warning || !strings.Contains(found[0].Detail, "10.1.230.1") {
		t.Fatalf("a routed target: want one warning naming the gateway, got %s", allSummaries(found))
	}
	m = modelTarget()
	m.Address = "127.0.0.1"
	one(t, ModelTargetAddress(m), "loopback", "10.1.230.180", "spark2")
	m.SSHHost, m.SourceHost = "127.0.0.1", "127.0.0.1" // a target on the source's own node
	if found := ModelTargetAddress(m); len(found) != 0 {
		t.Fatalf("loopback on the source's own node refused: %s", allSummaries(found))
	}
}

func TestModelTargetDir(t *testing.T) {
	m := modelTarget()
	m.Path = "/tmp/shared-models/m"
	if found := ModelTargetDir(m); len(found) != 0 {
		t.Fatalf("a directory of the user's own refused: %s", allSummaries(found))
	}
	m.Untrusted = "the model's directory /tmp/shared-models/m is owned by ops2 (uid 1001), not by this SSH user: give a directory of your own."
	one(t, ModelTargetDir(m), `targets["spark2"].path = "/tmp/shared-models/m"`, "ops2 (uid 1001)", "10.1.230.181")
	if d := ModelTargetDir(m)[0]; d.Warning || d.Rule != D23 || d.Path.String() != `targets["spark2"].path` {
		t.Fatalf("want a D23 error on targets[spark2].path: %+v", d)
	}
}
