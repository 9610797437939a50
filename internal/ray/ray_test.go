package ray

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartCommandHead(t *testing.T) {
	gpus := int64(1)
	argv, env, err := StartCommand(StartOptions{RayCommand: "/opt/ray/bin/ray", Head: true, GCSPort: 6379, NodeIP: "192.168.200.12",
		NumGPUs: &gpus, Resources: map[string]float64{"spark.head": 1}, DashboardHost: "127.0.0.1",
		Env:       map[string]string{"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1"},
		ExtraArgs: []string{"--object-store-memory", "1000000000"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "/opt/ray/bin/ray start --head --port 6379 " +
		"--dashboard-host 127.0.0.1 --node-ip-address 192.168.200.12 --num-gpus 1 --resources {\"spark.head\":1} " +
		"--disable-usage-stats --object-store-memory 1000000000"
	if got := strings.Join(argv[4:], " "); got != want {
		t.Fatalf("argv:\n got %s\nwant %s", got, want)
	}
	if string(env) != "GLOO_SOCKET_IFNAME='enp1s0f1np1'\nNCCL_SOCKET_IFNAME='enp1s0f1np1'\n" {
		t.Fatalf("env file = %q", env)
	}
}

// The environment reaches ray start's own environment through stdin, and
// no value is in its argv (which ps shows every user).
func TestStartCommandEnvReachesRayNotArgv(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "ray")
	// A stand-in for ray (this test starts nothing): prints its argv and
	// the variables under test.
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"argv: $*\"\necho \"SECRETISH=$SECRETISH\"\necho \"Q=$Q\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	value := "tok-3f9 'with quotes' $(id) `x`"
	argv, env, err := StartCommand(StartOptions{RayCommand: fake, HeadAddress: "10.0.0.1:6379",
		Env: map[string]string{"SECRETISH": value, "Q": "a b"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(argv, " "), "tok-3f9") {
		t.Fatalf("a value is in argv: %q", argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"argv: start --address 10.0.0.1:6379 --disable-usage-stats", "SECRETISH=" + value, "Q=a b"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestStartCommandWorker(t *testing.T) {
	argv, _, err := StartCommand(StartOptions{HeadAddress: "192.168.200.12:6379"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(argv[4:], " "); got != "ray start --address 192.168.200.12:6379 --disable-usage-stats" {
		t.Fatalf("argv = %s", got)
	}
	if _, _, err := StartCommand(StartOptions{}); err == nil {
		t.Fatal("a worker without a head address was accepted")
	}
	if _, _, err := StartCommand(StartOptions{Head: true, Env: map[string]string{"BAD=KEY": "x"}}); err == nil {
		t.Fatal("an env key with '=' was accepted")
	}
}

const table = `2026-12-02 INFO some ray log line
@@nodes {"gcs": "up", "ray_version": "2.52.1", "nodes": [
{"id": "aa", "alive": true, "ip": "10.1.230.180", "hostname": "spark1", "is_head": true, "resources": {"GPU": 1.0, "node:10.1.230.180": 1.0, "node:__internal_head__": 1.0}, "labels": {}},
{"id": "bb", "alive": false, "ip": "192.168.200.13", "hostname": "spark2", "is_head": false, "resources": {}, "labels": {}},
{"id": "cc", "alive": true, "ip": "192.168.200.13", "hostname": "spark2", "is_head": false, "resources": {"GPU": 1.0, "node:192.168.200.13": 1.0}, "labels": {}}]}
`

func TestParseNodes(t *testing.T) {
	tb, err := ParseNodes(strings.ReplaceAll(table, "\n{", "{"))
	if err != nil {
		t.Fatal(err)
	}
	if !tb.GCSUp || tb.RayVersion != "2.52.1" || len(tb.Nodes) != 3 {
		t.Fatalf("table = %+v", tb)
	}
	if n, ok := tb.Alive("192.168.200.13"); !ok || n.ID != "cc" {
		t.Fatalf("alive lookup skipped the dead row wrongly: %+v", n)
	}
	if !tb.Nodes[0].IsHead || tb.Nodes[0].Resources["node:10.1.230.180"] != 1 {
		t.Fatalf("head row = %+v", tb.Nodes[0])
	}
}

func TestParseNodesGCSDown(t *testing.T) {
	tb, err := ParseNodes(`@@nodes {"gcs": "down", "error": "[Errno 111] Connection refused"}`)
	if err != nil || tb.GCSUp || !strings.Contains(tb.GCSError, "refused") {
		t.Fatalf("down GCS: %+v %v", tb, err)
	}
	if !tb.GCSGone() {
		t.Fatal("a refused connection is a GCS that is gone")
	}
	slow, _ := ParseNodes(`@@nodes {"gcs": "down", "error": "timed out"}`)
	if slow.GCSUp || slow.GCSGone() {
		t.Fatalf("a GCS that did not answer in time is not known to be gone: %+v", slow)
	}
	if _, err := ParseNodes("Traceback (most recent call last):\n ImportError: ray"); err == nil {
		t.Fatal("output without a table parsed")
	}
}

func FuzzParseNodes(f *testing.F) {
	f.Add(table)
	f.Add("@@nodes {}")
	f.Fuzz(func(t *testing.T, out string) {
		tb, err := ParseNodes(out)
		if err != nil {
			return
		}
		for _, n := range tb.Nodes {
			if got, ok := tb.Alive(n.IP); ok && !got.Alive {
				t.Fatal("Alive returned a dead node")
			}
		}
	})
}

// The line printed when the runtime's container is not running parses to a
// table whose GCS is gone for sure (the cluster is dropped, not an error).
func TestNotRunningLineIsGone(t *testing.T) {
	tbl, err := ParseNodes(NotRunningLine("ray-node") + "\n")
	if err != nil || !tbl.GCSGone() || tbl.GCSUp || !strings.Contains(tbl.GCSError, "ray-node is not running") {
		t.Fatalf("%+v %v", tbl, err)
	}
	if (Table{GCSError: "timed out"}).GCSGone() {
		t.Fatal("a timeout proves nothing")
	}
}

// A node killed without a word (its container removed, OOM) stays listed
// alive until the GCS's health checks fail, beside the same node started
// again under the same IP: Alive is the one that registered last.
func TestAliveIsTheLatestIncarnation(t *testing.T) {
	tb := Table{Nodes: []Node{
		{ID: "dead", IP: "10.0.0.2", StartedMs: 300},
		{ID: "old", Alive: true, IP: "10.0.0.2", StartedMs: 100, Labels: map[string]string{"team": "b1"}},
		{ID: "new", Alive: true, IP: "10.0.0.2", StartedMs: 200, Labels: map[string]string{"team": "b2"}},
		{ID: "other", Alive: true, IP: "10.0.0.3", StartedMs: 400},
	}}
	if n, ok := tb.Alive("10.0.0.2"); !ok || n.ID != "new" {
		t.Fatalf("Alive(10.0.0.2) = %q, %v; want the latest alive incarnation", n.ID, ok)
	}
	if n, ok := tb.AliveExcept("10.0.0.2", map[string]bool{"new": true}); !ok || n.ID != "old" {
		t.Fatalf("AliveExcept(new) = %q, %v; want old", n.ID, ok)
	}
	if _, ok := tb.AliveExcept("10.0.0.2", map[string]bool{"new": true, "old": true}); ok {
		t.Fatal("every alive incarnation stale, yet one was found")
	}
}
