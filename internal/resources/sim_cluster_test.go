package resources_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/lab-infra/terraform-provider-spark/internal/sim"
)

// A cluster's life on simulated nodes, as TestAccRayCluster_fabricLifecycle
// lives it on the lab: the plan knows every registered IP before anything
// starts; a worker changes, comes and goes without the head restarting; a
// dead worker is named by the refresh and restarted; a change of the head
// replaces the cluster; destroy leaves no Ray.
func TestSimRayCluster_lifecycle(t *testing.T) {
	l := newSimLab(t, 3)
	c := simCluster{workers: map[string]int{"w1": 1},
		extra: map[string]any{"secret_env_wo": map[string]any{"SPARK_SECRET": "s3cret"}, "secret_env_wo_version": 1}}
	gcs := fabricIP(0) + ":6379"

	// Create: every registered IP is known at plan (Ray's own detection,
	// run on the nodes), node IDs are not.
	p, st := l.converge(clusterType, c.config(l), sim.State{})
	noDiagnostics(t, "create plan", p.Diagnostics)
	expectValues(t, "the create's plan", p.Planned, map[string]string{
		"id": l.host(0), "head_address": gcs, "ray_version": sim.RayVersion, "gcs_port": "6379",
		"auth_mode": "token", "dashboard_host": "127.0.0.1",
		"head.registered_ip": fabricIP(0), "head.alive": "true", "head.node_id": "<unknown>",
		"workers.w1.registered_ip": fabricIP(1), "workers.w1.alive": "true", "workers.w1.node_id": "<unknown>",
		"workers.w1.resources": "{}", "workers.w1.labels": "{}",
	})
	expectValues(t, "the created state", st.Value, map[string]string{
		"head_address": gcs, "head.registered_ip": fabricIP(0), "head.num_gpus": "1",
		"workers.w1.registered_ip": fabricIP(1), "workers.w1.alive": "true", "secret_env_wo": "<null>",
	})
	headID, w1ID := show(t, st.Value, "head", "node_id"), show(t, st.Value, "workers", "w1", "node_id")
	if len(headID) != 56 || len(w1ID) != 56 || headID == w1ID {
		t.Errorf("node IDs %q and %q: want two of Ray's (56 hex digits)", headID, w1ID)
	}
	if !l.model.Running(0, gcs) || !l.model.Running(1, gcs) {
		t.Fatal("Ray does not run on the head and the worker after the create")
	}

	// The same configuration: nothing to do, nothing to say.
	p = l.mustPlan(clusterType, c.config(l), st)
	if ch := p.Changes(); ch != "" {
		t.Errorf("a plan of the running cluster changes:\n%s", ch)
	}
	noDiagnostics(t, "no-change plan", append(p.RefreshDiagnostics, p.Diagnostics...))

	// A worker's label changes: Ray restarts on that worker only.
	c.worker = map[string]map[string]any{"w1": {"labels": map[string]any{"rack": "r2"}}}
	p, st = l.converge(clusterType, c.config(l), st)
	if len(p.RequiresReplace) > 0 {
		t.Errorf("a worker's label replaces the cluster: %v", p.RequiresReplace)
	}
	expectValues(t, "the plan of a worker's label", p.Planned, map[string]string{
		"head.node_id": headID, "workers.w1.node_id": "<unknown>", "workers.w1.registered_ip": fabricIP(1),
		"workers.w1.labels.rack": "r2",
	})
	expectValues(t, "the state after a worker's label", st.Value, map[string]string{
		"head.node_id": headID, "workers.w1.labels.rack": "r2", "workers.w1.alive": "true"})
	if got := show(t, st.Value, "workers", "w1", "node_id"); got == w1ID {
		t.Error("the worker whose label changed kept its Ray node")
	}
	w1ID = show(t, st.Value, "workers", "w1", "node_id")

	// A worker added joins the running head; the others keep running.
	c.workers["w2"] = 2
	p, st = l.converge(clusterType, c.config(l), st)
	expectValues(t, "the plan of a worker added", p.Planned, map[string]string{
		"head.node_id": headID, "workers.w1.node_id": w1ID, "workers.w2.node_id": "<unknown>",
		"workers.w2.registered_ip": fabricIP(2), "workers.w2.alive": "true",
	})
	if !l.model.Running(2, gcs) {
		t.Error("Ray does not run on the worker added")
	}

	// The worker removed: Ray stops there only.
	delete(c.workers, "w2")
	p, st = l.converge(clusterType, c.config(l), st)
	expectValues(t, "the plan of a worker removed", p.Planned, map[string]string{
		"head.node_id": headID, "workers.w1.node_id": w1ID, "workers.w2": "<absent>"})
	expectValues(t, "the state after a worker removed", st.Value, map[string]string{
		"head.node_id": headID, "workers.w1.node_id": w1ID, "workers.w2": "<absent>"})
	if l.model.Running(2, gcs) || !l.model.Running(1, gcs) {
		t.Error("the removal stopped the wrong worker")
	}

	// The worker's raylet dies: the refresh says so, the plan restarts it.
	if err := l.model.KillRaylet(1); err != nil {
		t.Fatal(err)
	}
	p, st = l.converge(clusterType, c.config(l), st)
	expectValues(t, "the refreshed state of a dead worker", p.Refreshed, map[string]string{
		"workers.w1.alive": "false", "head.alive": "true"})
	expectDiagnostic(t, p.RefreshDiagnostics, diagnostic{severity: warning, summary: "Ray workers not alive",
		detail: []string{"w1 (" + l.host(1) + ", registered as " + fabricIP(1) + ")", "The plan restarts them."}})
	expectDiagnostic(t, p.Diagnostics, diagnostic{severity: warning, summary: "Ray worker is not alive",
		attr: attr("workers", "[w1]"), detail: []string{"apply will restart Ray on it", "registers as " + fabricIP(1)}})
	expectValues(t, "the plan of a dead worker", p.Planned, map[string]string{
		"workers.w1.alive": "true", "workers.w1.node_id": "<unknown>", "head.node_id": headID})
	expectValues(t, "the state after the restart", st.Value, map[string]string{"workers.w1.alive": "true", "head.node_id": headID})
	if p = l.mustPlan(clusterType, c.config(l), st); p.Changes() != "" {
		t.Errorf("the plan after the restart changes:\n%s", p.Changes())
	}

	// A label on the head: the head changes, the cluster is replaced.
	c.head = map[string]any{"labels": map[string]any{"role": "head"}}
	p, st = l.converge(clusterType, c.config(l), st)
	if !hasPath(p.RequiresReplace, attr("head", "labels")) {
		t.Errorf("a label on the head does not replace the cluster: %v", p.RequiresReplace)
	}
	expectValues(t, "the replacement's plan", p.Planned, map[string]string{
		"head_address": gcs, "head.node_id": "<unknown>", "workers.w1.node_id": "<unknown>", "head.labels": "{role=head}"})
	expectValues(t, "the state after the replace", st.Value, map[string]string{
		"head.labels": "{role=head}", "head.alive": "true", "workers.w1.alive": "true"})
	if got := show(t, st.Value, "head", "node_id"); got == headID {
		t.Error("the replace kept the head's Ray node")
	}

	// Another GCS port: the cluster is replaced, and the plan does not
	// probe the new port from the workers as if they already ran there.
	c.extra = map[string]any{"gcs_port": 6380}
	p, st = l.converge(clusterType, c.config(l), st)
	if !hasPath(p.RequiresReplace, attr("gcs_port")) {
		t.Errorf("another gcs_port does not replace the cluster: %v", p.RequiresReplace)
	}
	expectValues(t, "the state after the port moved", st.Value, map[string]string{
		"head_address": fabricIP(0) + ":6380", "workers.w1.alive": "true"})

	// Destroy: no Ray left anywhere.
	if err := l.terraform().Destroy(context.Background(), clusterType, c.config(l), st); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	for i := range 3 {
		if l.model.Running(i, gcs) {
			t.Errorf("Ray still runs on node %d after the destroy", i)
		}
	}
}

// Drift of the head: a head whose raylet died (its GCS still answers) is
// replaced; a head whose node restarted took the cluster with it, which
// the refresh drops and the plan creates again.
func TestSimRayCluster_headDrift(t *testing.T) {
	l := newSimLab(t, 2)
	c := simCluster{workers: map[string]int{"w1": 1}}
	gcs := fabricIP(0) + ":6379"
	_, st := l.converge(clusterType, c.config(l), sim.State{})
	headID := show(t, st.Value, "head", "node_id")

	if err := l.model.KillRaylet(0); err != nil {
		t.Fatal(err)
	}
	p, st := l.converge(clusterType, c.config(l), st)
	expectDiagnostic(t, p.RefreshDiagnostics, diagnostic{severity: warning, summary: "Ray head is not alive",
		detail: []string{"No alive node is registered as " + fabricIP(0) + " in the cluster at " + gcs, "replaces the cluster"}})
	if !hasPath(p.RequiresReplace, attr("head")) {
		t.Errorf("a dead head does not replace the cluster: %v", p.RequiresReplace)
	}
	if got := show(t, st.Value, "head", "node_id"); got == headID || show(t, st.Value, "head", "alive") != "true" {
		t.Errorf("after the replace, the head is node %s, alive %s", got, show(t, st.Value, "head", "alive"))
	}

	l.model.Reboot(0)
	p, st = l.converge(clusterType, c.config(l), st)
	expectDiagnostic(t, p.RefreshDiagnostics, diagnostic{severity: warning, summary: "Ray cluster is gone",
		detail: []string{"The head's GCS at " + gcs + " does not answer (connection refused, from the head)", "created again"}})
	if !p.Refreshed.IsNull() {
		t.Errorf("the refresh kept a cluster whose GCS is gone: %v", p.Refreshed)
	}
	expectValues(t, "the re-created state", st.Value, map[string]string{
		"head.alive": "true", "workers.w1.alive": "true", "head_address": gcs})
	if !l.model.Running(0, gcs) || !l.model.Running(1, gcs) {
		t.Error("the cluster was not created again")
	}
}

// An import adopts the running cluster, from the head's ssh_host alone or
// with workers; a malformed ID is refused before anything is read.
func TestSimRayCluster_import(t *testing.T) {
	l := newSimLab(t, 3)
	c := simCluster{workers: map[string]int{"w1": 1}}
	_, created := l.converge(clusterType, c.config(l), sim.State{})
	ctx := context.Background()

	st, err := l.terraform().Import(ctx, clusterType, l.host(0))
	if err != nil {
		t.Fatalf("import of the head: %v", err)
	}
	expectValues(t, "the state imported from the head", st.Value, map[string]string{
		"id": l.host(0), "head.registered_ip": fabricIP(0), "head_address": fabricIP(0) + ":6379", "gcs_port": "6379",
		"auth_mode": "token", "dashboard_host": "127.0.0.1", "ray_version": sim.RayVersion,
		"head.node_id": show(t, created.Value, "head", "node_id"), "head.alive": "true", "workers": "<null>",
	})

	st, err = l.terraform().Import(ctx, clusterType, l.host(0)+", w1="+l.host(1))
	if err != nil {
		t.Fatalf("import of the head and a worker: %v", err)
	}
	expectValues(t, "the state imported with a worker", st.Value, map[string]string{
		"workers.w1.registered_ip": fabricIP(1), "workers.w1.alive": "true",
		"workers.w1.node_id": show(t, created.Value, "workers", "w1", "node_id"), "workers.w1.ssh_host": l.host(1),
	})

	// The first plan adopts what runs: it restarts nothing.
	p := l.mustPlan(clusterType, c.config(l), st)
	if len(p.RequiresReplace) > 0 {
		t.Errorf("the plan after an import replaces the cluster: %v", p.RequiresReplace)
	}
	expectValues(t, "the plan after an import", p.Planned, map[string]string{
		"head.node_id": show(t, created.Value, "head", "node_id"), "workers.w1.node_id": show(t, created.Value, "workers", "w1", "node_id")})

	for _, tc := range []struct {
		name, id string
		want     diagnostic
	}{
		{"no head", ",w1=" + l.host(1), diagnostic{summary: "Invalid import ID",
			detail: []string{`want <head ssh_host>[,<worker name>=<worker ssh_host>...]`}}},
		{"a worker without its host", l.host(0) + ",w1", diagnostic{summary: "Invalid import ID",
			detail: []string{`import ID part "w1": want <worker name>=<worker ssh_host>`}}},
		{"a worker not in the cluster", l.host(0) + ",w2=" + l.host(2), diagnostic{summary: "Worker is not in the Ray cluster",
			attr: attr("workers", "[w2]"), detail: []string{"has none of its addresses (" + fabricIP(2) + ", 127.0.0.1)",
				"registered in the cluster at " + fabricIP(0) + ":6379"}}},
		{"no cluster on the head", l.host(2), diagnostic{summary: "Cannot import the Ray cluster",
			detail: []string{"no Ray cluster found on the head", "No such file or directory"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.terraform().Import(ctx, clusterType, tc.id)
			expectDiagnostic(t, stepDiagnostics(t, err), tc.want)
		})
	}
}

// A worker an update starts registers under another address than the plan
// predicted (a Ray that detects its own address another way): the apply
// fails at once, naming both addresses (Ray will not move it; waiting is pointless),
// and stops the worker it started, so no Ray of this update's outlives it,
// nor the auth token it wrote there (state does not hold that worker: no
// destroy would remove it); the workers it did not touch keep running.
func TestSimRayCluster_updateRegisteredElsewhereIsTakenBack(t *testing.T) {
	l := newSimLab(t, 3)
	gcs := fabricIP(0) + ":6379"
	c := simCluster{workers: map[string]int{"w1": 1}}
	_, st := l.converge(clusterType, c.config(l), sim.State{})
	c.workers["w2"] = 2
	// Bounded: without the hostnames, the wait would run to this timeout.
	c.extra = map[string]any{"timeouts": map[string]any{"update": "20s"}}
	p := l.mustPlan(clusterType, c.config(l), st)
	l.model.RegisterAs(2, netip.MustParseAddr("10.20.0.13"))
	_, err := l.apply(p)
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "Ray workers did not register as planned",
		detail: []string{"Ray registered w2 as 10.20.0.13, not " + fabricIP(2) + " as planned"}})
	if l.model.Running(2, gcs) {
		t.Error("the worker the failed update started still runs Ray")
	}
	if l.model.Token(2) != "" {
		t.Error("the auth token the failed update wrote on the worker it added is still there")
	}
	if l.model.Token(1) == "" {
		t.Error("the failed update removed the token of a worker it did not start")
	}
	if !l.model.Running(1, gcs) || !l.model.Running(0, gcs) {
		t.Error("the failed update stopped a node it did not start")
	}
}

// A create starts each worker's Ray once the head's GCS listens, not after
// the head's ray start returns, nor after the head's raylet registered: a
// worker's ray start needs only the GCS (Ray 2.52.1, node.py). The
// simulated head's ray start takes its time as a real one does: its GCS
// listens at 300 ms, its raylet registers at 900 ms, it returns at 1.2 s.
// A simulated worker's ray start fails when no GCS listens yet.
func TestSimRayCluster_workersStartOnceTheGCSListens(t *testing.T) {
	l := newSimLab(t, 2)
	l.model.SlowHeadStart(sim.HeadStart{GCSListens: 300 * time.Millisecond, Registers: 900 * time.Millisecond, Returns: 1200 * time.Millisecond})
	c := simCluster{workers: map[string]int{"w1": 1}}
	_, st := l.converge(clusterType, c.config(l), sim.State{})
	if show(t, st.Value, "workers", "w1", "alive") != "true" {
		t.Fatal("the worker is not alive after the create")
	}
	gcsListens, headRegistered := l.model.StartTimes(0)
	workerStarted, _ := l.model.StartTimes(1)
	if workerStarted.Before(gcsListens) || !workerStarted.Before(headRegistered) {
		t.Errorf("the worker's ray start ran %v after the head's GCS listened, and the head's raylet registered %v after it: "+
			"want it after the first and before the second", workerStarted.Sub(gcsListens), headRegistered.Sub(gcsListens))
	}
}
