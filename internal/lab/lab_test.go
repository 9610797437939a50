package lab

import "testing"

// The lab's addresses are fixed: tests and the demo name them.
func TestNodeSpec(t *testing.T) {
	for _, c := range []struct {
		i                                 int
		name, container, external, fabric string
	}{
		{1, "spark1", "spark-lab-node1", "172.29.10.11", "192.168.229.11"},
		{3, "spark3", "spark-lab-node3", "172.29.10.13", "192.168.229.13"},
	} {
		n := nodeSpec(c.i)
		if n.Name != c.name || n.Container != c.container || n.ExternalIP != c.external || n.FabricIP != c.fabric {
			t.Errorf("nodeSpec(%d) = %+v", c.i, n)
		}
		if n.SSHHost != n.ExternalIP || n.SSHPort != 22 || n.RayCommand != rayCommand || n.ModelPath != modelPath {
			t.Errorf("nodeSpec(%d) is not reached as the lab reaches it: %+v", c.i, n)
		}
	}
}

// Each lane is its own lab: disjoint nodes, in order, and everything else
// (user, key, versions) the same as the whole lab's.
func TestLanesSplitTheNodes(t *testing.T) {
	f := &File{SSHUser: "ops", RayVersion: "2.52.1"}
	for i := 1; i <= 4; i++ {
		f.Nodes = append(f.Nodes, nodeSpec(i))
	}
	lanes, err := f.lanes(2)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"spark1", "spark2"}, {"spark3", "spark4"}}
	for i, lane := range lanes {
		var got []string
		for _, n := range lane.Nodes {
			got = append(got, n.Name)
		}
		if len(got) != 2 || got[0] != want[i][0] || got[1] != want[i][1] {
			t.Errorf("lane %d has %v, want %v", i+1, got, want[i])
		}
		if lane.SSHUser != "ops" || lane.RayVersion != "2.52.1" {
			t.Errorf("lane %d lost the lab's fields: %+v", i+1, lane)
		}
	}
	if len(f.Nodes) != 4 {
		t.Errorf("splitting changed the whole lab: %d nodes", len(f.Nodes))
	}
	if _, err := f.lanes(3); err == nil {
		t.Error("4 nodes split into 3 lanes without an error")
	}
}

func TestUnheldFabricIP(t *testing.T) {
	f := &File{FabricSubnet: "172.31.7.0/24", Nodes: []Node{{Name: "spark1", FabricIP: "172.31.7.2"}}}
	if ip, err := f.UnheldFabricIP(); err != nil || ip != "172.31.7.254" {
		t.Fatalf("got %q, %v; want 172.31.7.254", ip, err)
	}
	f.Nodes[0].FabricIP = "172.31.7.254"
	if _, err := f.UnheldFabricIP(); err == nil {
		t.Fatal("an address a node holds was given")
	}
	f.FabricSubnet = "fd00::/64"
	if _, err := f.UnheldFabricIP(); err == nil {
		t.Fatal("an IPv6 subnet was taken")
	}
}
