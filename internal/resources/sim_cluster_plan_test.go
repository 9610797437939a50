package resources_test

import (
	"net/netip"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/lab-infra/terraform-provider-spark/internal/sim"
)

func hasPath(paths []*tftypes.AttributePath, p *tftypes.AttributePath) bool {
	for _, q := range paths {
		if q.Equal(p) {
			return true
		}
	}
	return false
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
		// The same, the worker's node_ip given: the head reads its route
		// to it in its own round trip, and it crosses a router too.
		name:  "a worker off the fabric, its address given",
		nodes: func(m *sim.Model) { m.MoveNode(1, netip.MustParseAddr("10.21.0.2")) },
		cluster: simCluster{headIP: "10.20.0.1", workers: map[string]int{"w1": 1},
			worker: map[string]map[string]any{"w1": {"node_ip": "10.21.0.2"}}},
		want: []diagnostic{
			{summary: "Worker reaches the head only through a gateway", rule: "D5", attr: attr("workers", "[w1]", "ssh_host"),
				detail: []string{"would reach the head's Ray address 10.20.0.1 through gateway 10.21.255.254 on enP7s7"}},
			{severity: warning, summary: "The head reaches the worker only through a gateway", rule: "D5", attr: attr("workers", "[w1]", "node_ip"),
				detail: []string{"would reach 10.21.0.2, the address worker \"w1\"", "through gateway 10.20.255.254 on enP7s7"}},
		},
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
				if w.severity != warning { // a warning blocks nothing, a destroy included
					w.detail = append(w.detail, destroyHint)
				}
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
