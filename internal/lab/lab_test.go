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
