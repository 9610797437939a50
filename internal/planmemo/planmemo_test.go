package planmemo

import (
	"fmt"
	"sync"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
)

func TestPlanMemoPlans(t *testing.T) {
	gpus := func(n float64) Cluster { return Cluster{GPUs: &preflight.PlannedGPUs{Total: n}} }
	type rec struct {
		addr string
		p    Cluster
	}
	for _, c := range []struct {
		name    string
		records []rec
		lookup  string
		found   bool
		total   float64 // GPUs.Total of what is found
	}{
		{name: "nothing recorded", lookup: "192.168.200.12:6379"},
		{name: "recorded, read back", records: []rec{{"192.168.200.12:6379", gpus(2)}},
			lookup: "192.168.200.12:6379", found: true, total: 2},
		{name: "another port is another cluster", records: []rec{{"192.168.200.12:6379", gpus(2)}},
			lookup: "192.168.200.12:6380"},
		{name: "another address is another cluster", records: []rec{{"192.168.200.12:6379", gpus(2)}},
			lookup: "10.1.230.180:6379"},
		{name: "the last plan of a cluster wins", records: []rec{{"192.168.200.12:6379", gpus(2)}, {"192.168.200.12:6379", gpus(1)}},
			lookup: "192.168.200.12:6379", found: true, total: 1},
		{name: "each cluster keeps its own", records: []rec{{"192.168.200.12:6379", gpus(2)}, {"192.168.200.12:6380", gpus(1)}},
			lookup: "192.168.200.12:6379", found: true, total: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var pm Memo // the zero value is ready
			for _, r := range c.records {
				pm.RecordCluster(r.addr, r.p)
			}
			p, ok := pm.Cluster(c.lookup)
			if ok != c.found {
				t.Fatalf("found = %v, want %v", ok, c.found)
			}
			if ok && p.GPUs.Total != c.total {
				t.Fatalf("GPUs.Total = %g, want %g", p.GPUs.Total, c.total)
			}
		})
	}
}

// What the deployment's plan reads back is what the cluster's plan stored,
// field by field.
func TestPlanMemoKeepsEveryField(t *testing.T) {
	var pm Memo
	in := Cluster{Runtime: nodeexec.Runtime{RayCommand: "/opt/ray/bin/ray"}, Nodes: []preflight.ClusterNode{{IP: "192.168.200.12"}},
		Env: map[string]string{"NCCL_SOCKET_IFNAME": "enp1s0f1np1"}}
	pm.RecordCluster("192.168.200.12:6379", in)
	out, ok := pm.Cluster("192.168.200.12:6379")
	if !ok || out.Runtime.Ray() != "/opt/ray/bin/ray" || len(out.Nodes) != 1 || out.Nodes[0].IP != "192.168.200.12" ||
		out.Env["NCCL_SOCKET_IFNAME"] != "enp1s0f1np1" || out.GPUs != nil {
		t.Fatalf("read back %+v, %v", out, ok)
	}
}

func TestPlanMemoRunning(t *testing.T) {
	type at struct {
		head string
		port int
	}
	for _, c := range []struct {
		name   string
		noted  []at
		head   string
		port   int
		wanted bool
	}{
		{name: "nothing noted", head: "10.1.230.180", port: 6379},
		{name: "noted", noted: []at{{"10.1.230.180", 6379}}, head: "10.1.230.180", port: 6379, wanted: true},
		{name: "another port", noted: []at{{"10.1.230.180", 6379}}, head: "10.1.230.180", port: 6380},
		{name: "another head", noted: []at{{"10.1.230.180", 6379}}, head: "10.1.230.181", port: 6379},
		{name: "IPv6 head", noted: []at{{"fd00::1", 6379}}, head: "fd00::1", port: 6379, wanted: true},
		// Joined as an address, "fd00::1" port 6379 is not "fd00::1:6" port 379.
		{name: "IPv6 head, port not read into the host", noted: []at{{"fd00::1", 6379}}, head: "fd00::1:6", port: 379},
	} {
		t.Run(c.name, func(t *testing.T) {
			var pm Memo
			for _, n := range c.noted {
				pm.NoteRunning(n.head, n.port)
			}
			if got := pm.Running(c.head, c.port); got != c.wanted {
				t.Fatalf("Running(%s, %d) = %v, want %v", c.head, c.port, got, c.wanted)
			}
		})
	}
}

// Terraform plans resources concurrently through one provider process:
// run with -race, this fails if a method reads or writes without the lock.
func TestPlanMemoConcurrentUse(t *testing.T) {
	var pm Memo
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			addr := fmt.Sprintf("192.168.200.%d:6379", i)
			for j := range 50 {
				pm.RecordCluster(addr, Cluster{GPUs: &preflight.PlannedGPUs{Total: float64(j)}})
				if _, ok := pm.Cluster(addr); !ok {
					t.Errorf("%s: own plan not found", addr)
				}
				pm.NoteRunning("10.1.230.180", 6000+i)
				_ = pm.Running("10.1.230.180", 6000+(i+1)%16)
			}
		})
	}
	wg.Wait()
	for i := range 16 {
		if p, ok := pm.Cluster(fmt.Sprintf("192.168.200.%d:6379", i)); !ok || p.GPUs.Total != 49 {
			t.Errorf("cluster %d: %+v, %v", i, p, ok)
		}
		if !pm.Running("10.1.230.180", 6000+i) {
			t.Errorf("port %d not noted", 6000+i)
		}
	}
}

// A spark_model's directories are found by node and directory, each its own.
func TestMemoModels(t *testing.T) {
	var nilMemo *Memo
	if _, ok := nilMemo.Model("spark1", "/m"); ok {
		t.Error("no memo found a model")
	}
	var pm Memo
	pm.PutModel("spark1", "/m", map[string]int64{"config.json": 10})
	if f, ok := pm.Model("spark1", "/m"); !ok || f["config.json"] != 10 {
		t.Errorf("read back %v, %v", f, ok)
	}
	for _, c := range [][2]string{{"spark2", "/m"}, {"spark1", "/m2"}} {
		if _, ok := pm.Model(c[0], c[1]); ok {
			t.Errorf("%s:%s found a model put elsewhere", c[0], c[1])
		}
	}
}
