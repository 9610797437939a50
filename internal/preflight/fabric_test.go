package preflight

import (
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
)

// D33 through CheckCluster: the worker's fabric port at MTU 1500 under a
// head at 9000 is warned of; the port down is refused, a fault now where
// the cluster runs, unless the node declares it as its own interface (D9
// refuses that already).
func TestCheckClusterFabricLinks(t *testing.T) {
	cluster := func(workerMTU int, workerUp, running bool, declared string) ClusterPlan {
		h, w := head("192.168.200.12"), worker(nil)
		w.NodeIP = "192.168.200.13"
		h.Facts.Interfaces[1].MTU = 9000
		w.Facts.Interfaces[1].MTU = workerMTU
		w.Facts.Interfaces[1].Up = workerUp
		w.Interface = declared
		c := Cluster{Head: h, Workers: []Node{w}, GCSPort: 6379, HeadRunning: running}
		if running {
			c.Known = map[string]string{"head": "192.168.200.12", "spark2": "192.168.200.13"}
		}
		p := CheckCluster(c)
		var d33 []finding.Finding
		for _, f := range p.Findings {
			if f.Rule == D33 {
				d33 = append(d33, f)
			}
		}
		p.Findings = d33
		return p
	}
	if p := cluster(9000, true, false, ""); len(p.Findings) != 0 {
		t.Fatalf("same MTU, up: %s", allSummaries(p.Findings))
	}
	p := cluster(1500, true, false, "")
	one(t, p.Findings, "different MTUs", "enp1s0f1np1 on head has MTU 9000", "on spark2 has MTU 1500", "settle on the smaller (1500)")
	if f := p.Findings[0]; f.Rule != D33 || !f.Warning || f.Node != "spark2" || f.Path.String() != `workers["spark2"].ssh_host` {
		t.Errorf("%+v", f)
	}
	var down []string
	for _, f := range cluster(9000, false, true, "").Findings {
		if f.Rule == D33 {
			down = append(down, f.Summary)
			if f.Warning || !f.Now {
				t.Errorf("a port down under a running cluster is a fault now: %+v", f)
			}
		}
	}
	if len(down) != 1 || down[0] != "The fabric port is down" {
		t.Fatalf("down: %v", down)
	}
	for _, f := range cluster(9000, false, true, "enp1s0f1np1").Findings {
		if f.Rule == D33 {
			t.Errorf("D33 repeats D9 on a declared interface: %+v", f)
		}
	}
}
