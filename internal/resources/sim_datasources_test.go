package resources_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/sim"
)

// The two data sources on simulated nodes, as their acceptance tests read
// the lab's (internal/datasources): what they return is what the nodes and
// Ray say, and a node or a cluster that is not there is an error naming it.

// readData is `terraform plan` reading data.<typ> with cfg.
func (l *simLab) readData(typ string, cfg map[string]any) (map[string]any, error) {
	l.t.Helper()
	return l.terraform().ReadData(context.Background(), typ, cfg)
}

// addressesOf is every address the data source lists on an interface.
func addressesOf(t *testing.T, got map[string]any) []string {
	t.Helper()
	var out []string
	ifs, _ := got["interfaces"].([]any)
	for _, i := range ifs {
		m, _ := i.(map[string]any)
		for _, a := range m["addresses"].([]any) {
			out = append(out, a.(string))
		}
	}
	return out
}

func TestSimNodeDataSource_factsOfTheNode(t *testing.T) {
	l := newSimLab(t, 2)
	got, err := l.readData("spark_node", map[string]any{"ssh_host": l.host(1)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"hostname": "spark-001", "ray_version": sim.RayVersion, "vllm_version": sim.VLLMVersion,
		"python_version": sim.PythonVersion, "gpu_count": float64(1)}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if id, _ := got["id"].(string); !strings.HasPrefix(id, l.host(1)+":") {
		t.Errorf("id = %v, want node 1's SSH address", got["id"])
	}
	if fp, _ := got["host_key_fingerprint"].(string); !strings.HasPrefix(fp, "SHA256:") {
		t.Errorf("host_key_fingerprint = %v, want OpenSSH's SHA256 form", got["host_key_fingerprint"])
	}
	addrs := addressesOf(t, got)
	if !slices.Contains(addrs, fabricIP(1)+"/16") || slices.Contains(addrs, fabricIP(0)+"/16") {
		t.Errorf("addresses = %v, want node 1's fabric address %s and not node 0's", addrs, fabricIP(1))
	}

	// The node moves to another address: the next read says so.
	l.model.MoveNode(1, netip.MustParseAddr("10.20.9.9"))
	got, err = l.readData("spark_node", map[string]any{"ssh_host": l.host(1)})
	if err != nil {
		t.Fatal(err)
	}
	if addrs := addressesOf(t, got); !slices.Contains(addrs, "10.20.9.9/16") {
		t.Errorf("after the move, addresses = %v, want 10.20.9.9", addrs)
	}
}

func TestSimNodeDataSource_unreachableNodeNamed(t *testing.T) {
	l := newSimLab(t, 1)
	_, err := l.readData("spark_node", map[string]any{"ssh_host": "127.0.0.1", "ssh_port": 1})
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "Cannot reach node", attr: attr("ssh_host"), detail: []string{"127.0.0.1"}})
}

func TestSimRayNodesDataSource_tableOfARunningCluster(t *testing.T) {
	l := newSimLab(t, 3)
	c := simCluster{workers: map[string]int{"w1": 1}}
	_, st := l.converge(clusterType, c.config(l), sim.State{})
	gcs := fabricIP(0) + ":6379"

	// Found from the head, as after `ray start --head` by hand, and named.
	for _, cfg := range []map[string]any{{"ssh_host": l.host(0)}, {"ssh_host": l.host(0), "ray_address": gcs}} {
		got, err := l.readData("spark_ray_nodes", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got["ray_address"] != gcs || got["id"] != gcs || got["ray_version"] != sim.RayVersion {
			t.Errorf("%v: ray_address %v id %v ray_version %v, want %s and %s", cfg, got["ray_address"], got["id"], got["ray_version"], gcs, sim.RayVersion)
		}
		nodes, _ := got["nodes"].([]any)
		var rows []string
		for _, n := range nodes {
			m := n.(map[string]any)
			rows = append(rows, fmt.Sprintf("%v %v %v %v", m["registered_ip"], m["hostname"], m["is_head"], m["alive"]))
		}
		want := []string{fabricIP(0) + " spark-000 true true", fabricIP(1) + " spark-001 false true"}
		if !slices.Equal(rows, want) {
			t.Errorf("%v: nodes = %q, want the head first, then the worker: %q", cfg, rows, want)
		}
	}

	// The worker's raylet dies: Ray keeps it in the table, dead, after the head.
	if err := l.model.KillRaylet(1); err != nil {
		t.Fatal(err)
	}
	got, err := l.readData("spark_ray_nodes", map[string]any{"ssh_host": l.host(0)})
	if err != nil {
		t.Fatal(err)
	}
	nodes := got["nodes"].([]any)
	if len(nodes) != 2 || nodes[1].(map[string]any)["alive"] != false {
		t.Errorf("after the worker's raylet died: nodes = %v, want it listed dead", nodes)
	}
	if err := l.terraform().Destroy(context.Background(), clusterType, c.config(l), st); err != nil {
		t.Fatal(err)
	}

	// No cluster: an error that says what was looked for, whether named
	// or found from the head (Ray's ray_current_cluster outlives the stop).
	for _, cfg := range []map[string]any{{"ssh_host": l.host(0), "ray_address": gcs}, {"ssh_host": l.host(0)}} {
		_, err = l.readData("spark_ray_nodes", cfg)
		expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "Ray cluster not running", attr: attr("ssh_host"), detail: []string{gcs, "does not answer"}})
	}

	// A node where Ray never ran: nothing to find.
	_, err = l.readData("spark_ray_nodes", map[string]any{"ssh_host": l.host(2)})
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "Cannot find the Ray cluster", attr: attr("ssh_host")})
}
