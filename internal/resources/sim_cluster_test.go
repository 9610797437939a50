package resources_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tftypes"

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

func hasPath(paths []*tftypes.AttributePath, p *tftypes.AttributePath) bool {
	for _, q := range paths {
		if q.Equal(p) {
			return true
		}
	}
	return false
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

// The plan reads every node before anything starts, and refuses what
// would fail or misbehave there, naming the attribute, the values seen and
// the rule; every error says how a destroy gets past it.
func TestSimRayCluster_planRefusals(t *testing.T) {
	const destroyHint = "`terraform destroy -refresh=false`"
	for _, tc := range []struct {
		name    string
		nodes   func(*sim.Model)
		cluster simCluster
		want    []diagnostic
	}{{
		name:    "node_ip not bound on the head",
		cluster: simCluster{headIP: "10.20.0.9"},
		want: []diagnostic{{summary: "node_ip is not an address of this node", rule: "D3", attr: attr("head", "node_ip"),
			detail: []string{`node_ip = "10.20.0.9"`, "10.20.0.1 on enP7s7"}}},
	}, {
		name:    "a worker without the head's Ray version",
		nodes:   func(m *sim.Model) { m.SetRayVersion(1, "2.0.0") },
		cluster: simCluster{workers: map[string]int{"w1": 1}},
		want: []diagnostic{
			{summary: "Ray versions differ across nodes", rule: "D6", detail: []string{"Ray 2.0.0 on w1; 2.52.1 on head"}},
			{summary: "Ray too old for token authentication", rule: "D16", attr: attr("auth_mode"), detail: []string{"w1 has Ray 2.0.0"}},
		},
	}, {
		name:    "a worker without Ray",
		nodes:   func(m *sim.Model) { m.SetRayVersion(1, "") },
		cluster: simCluster{workers: map[string]int{"w1": 1}},
		want:    []diagnostic{{summary: "Ray not found on a node", rule: "D6", detail: []string{"Ray was not found on w1 (", `ray_command "ray"`}}},
	}, {
		name:    "the GCS port held by another program",
		nodes:   func(m *sim.Model) { m.HoldPort(0, 6379, "redis-server") },
		cluster: simCluster{},
		want: []diagnostic{{summary: "GCS port is already in use on the head", rule: "D12", attr: attr("gcs_port"),
			detail: []string{"gcs_port = 6379 is held on the head", "by redis-server: stop that program or choose another gcs_port"}}},
	}, {
		name:    "the GCS port held by a Ray no state knows",
		nodes:   func(m *sim.Model) { _ = m.StartRay(0, "--head", "--port", "6379") },
		cluster: simCluster{},
		want: []diagnostic{{summary: "GCS port is already in use on the head", rule: "D12", attr: attr("gcs_port"),
			detail: []string{"by gcs_server: a Ray cluster this resource does not manage is running there", "terraform import <address>"}}},
	}, {
		name:    "a worker off the fabric",
		nodes:   func(m *sim.Model) { m.MoveNode(1, netip.MustParseAddr("10.21.0.2")) },
		cluster: simCluster{workers: map[string]int{"w1": 1}},
		want: []diagnostic{{summary: "Worker reaches the head only through a gateway", rule: "D5", attr: attr("workers", "[w1]", "ssh_host"),
			detail: []string{"would reach the head's Ray address 10.20.0.1 through gateway 10.21.255.254 on enP7s7"}}},
	}, {
		name:    "more GPUs than the worker has",
		cluster: simCluster{workers: map[string]int{"w1": 1}, worker: map[string]map[string]any{"w1": {"num_gpus": 2}}},
		want: []diagnostic{{summary: "num_gpus exceeds the node's GPUs", rule: "D15", attr: attr("workers", "[w1]", "num_gpus"),
			detail: []string{"num_gpus = 2, but nvidia-smi lists 1 GPU(s)"}}},
	}, {
		name:    "two nodes on one IP",
		cluster: simCluster{workers: map[string]int{"w1": 1}, worker: map[string]map[string]any{"w1": {"node_ip": "10.20.0.1"}}},
		want: []diagnostic{
			{summary: "Two nodes would register the same IP", rule: "D13", attr: attr("workers", "[w1]", "node_ip"),
				detail: []string{"nodes head and w1 would all register 10.20.0.1"}},
			{summary: "node_ip is not an address of this node", rule: "D3", attr: attr("workers", "[w1]", "node_ip")},
		},
	}, {
		name:    "an interface no node has",
		cluster: simCluster{workers: map[string]int{"w1": 1}, extra: map[string]any{"env": map[string]any{"NCCL_SOCKET_IFNAME": "ib0"}}},
		want: []diagnostic{
			{summary: "Interface named in env does not exist", rule: "D9", attr: attr("env"),
				detail: []string{`env NCCL_SOCKET_IFNAME = "ib0", but head (`, "its interfaces: enP7s7, lo"}},
			{summary: "Interface named in env does not exist", rule: "D9", attr: attr("env"),
				detail: []string{`env NCCL_SOCKET_IFNAME = "ib0", but w1 (`}},
		},
	}, {
		name:    "an interface that does not carry Ray's address",
		cluster: simCluster{extra: map[string]any{"env": map[string]any{"GLOO_SOCKET_IFNAME": "lo"}}},
		want: []diagnostic{{summary: "Interface named in env does not carry the node's Ray address", rule: "D9", attr: attr("env"),
			detail: []string{"interface lo carries 127.0.0.1/8, not 10.20.0.1"}}},
	}, {
		name:    "one VLLM_HOST_IP for every node",
		cluster: simCluster{workers: map[string]int{"w1": 1}, extra: map[string]any{"env": map[string]any{"VLLM_HOST_IP": "10.20.0.1"}}},
		want: []diagnostic{{summary: "VLLM_HOST_IP in env does not match the nodes' Ray addresses", rule: "D10", attr: attr("env"),
			detail: []string{"w1 registers 10.20.0.2"}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newSimLab(t, 2)
			if tc.nodes != nil {
				tc.nodes(l.model)
			}
			_, err := l.plan(clusterType, tc.cluster.config(l), sim.State{})
			ds := stepDiagnostics(t, err)
			for _, w := range tc.want {
				w.detail = append(w.detail, destroyHint)
				expectDiagnostic(t, ds, w)
			}
			if len(ds) != len(tc.want) {
				t.Errorf("%d diagnostics, want %d:\n%s", len(ds), len(tc.want), listDiagnostics(ds))
			}
		})
	}
}

// A dashboard open to the network is planned, with a warning on it.
func TestSimRayCluster_openDashboardWarns(t *testing.T) {
	l := newSimLab(t, 1)
	p := l.mustPlan(clusterType, simCluster{extra: map[string]any{"dashboard_host": "0.0.0.0"}}.config(l), sim.State{})
	expectDiagnostic(t, p.Diagnostics, diagnostic{severity: warning, summary: "Ray dashboard exposed to the network",
		attr: attr("dashboard_host"), detail: []string{"port 8265"}})
	expectValues(t, "the plan", p.Planned, map[string]string{"dashboard_host": "0.0.0.0", "head.registered_ip": fabricIP(0)})
}

// A check that guards a start does not block a plan that starts nothing:
// it warns, and the plan keeps the cluster as it runs. A plan that starts
// something still refuses it. A fault of what runs now (a registered
// address gone from its node) fails even the plan that starts nothing.
func TestSimRayCluster_failingChecksOnARunningCluster(t *testing.T) {
	l := newSimLab(t, 2)
	c := simCluster{workers: map[string]int{"w1": 1}}
	_, st := l.converge(clusterType, c.config(l), sim.State{})

	l.model.SetRayVersion(1, "2.0.0")
	p := l.mustPlan(clusterType, c.config(l), st)
	if ch := p.Changes(); ch != "" {
		t.Errorf("the plan of an unchanged cluster changes:\n%s", ch)
	}
	d := expectDiagnostic(t, p.Diagnostics, diagnostic{severity: warning, summary: "Ray versions differ across nodes", rule: "D6",
		detail: []string{"Nothing is started or restarted by this plan, so this is not an error now"}})
	if d != nil && len(p.Diagnostics) != 2 { // and D16, token authentication
		t.Errorf("diagnostics:\n%s", listDiagnostics(p.Diagnostics))
	}

	c.worker = map[string]map[string]any{"w1": {"labels": map[string]any{"rack": "r2"}}}
	_, err := l.plan(clusterType, c.config(l), st)
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "Ray versions differ across nodes", rule: "D6",
		detail: []string{"2.0.0 on w1"}})
	c.worker = nil
	l.model.SetRayVersion(1, sim.RayVersion)

	l.model.MoveNode(1, netip.MustParseAddr("10.20.0.12"))
	_, err = l.plan(clusterType, c.config(l), st)
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "The address Ray registered for a node is no longer on it",
		rule: "D3", attr: attr("workers", "[w1]", "node_ip"),
		detail: []string{"Ray registered it as node:10.20.0.2", "its addresses: 10.20.0.12 on enP7s7"}})
}

// A running worker cut off from its running head (a firewall rule, a
// switch port down) while Ray still lists it alive: the plan would change
// nothing, yet it is an error, so `plan -detailed-exitcode` in a scheduled
// job fails instead of exiting 0 on a warning.
func TestSimRayCluster_workerCutOffFailsThePlan(t *testing.T) {
	l := newSimLab(t, 2)
	c := simCluster{workers: map[string]int{"w1": 1}}
	_, st := l.converge(clusterType, c.config(l), sim.State{})
	l.model.CutOff(1)
	_, err := l.plan(clusterType, c.config(l), st)
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "Worker cannot open the head's GCS port", rule: "D5",
		attr: attr("workers", "[w1]", "ssh_host"), detail: []string{"failed (closed timed out)", "-refresh=false"}})
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
