package resources

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The deployment names its cluster's container from ray_address's port, as
// the cluster does from gcs_port.
func TestGCSPortOf(t *testing.T) {
	for in, want := range map[string]int{"10.0.0.1:6380": 6380, "[fd00::1]:7000": 7000, "": 6379, "10.0.0.1": 6379} {
		if got := gcsPortOf(in); got != want {
			t.Errorf("gcsPortOf(%q) = %d, want %d", in, got, want)
		}
	}
}

// Each cluster owns its container: two clusters on one node that name
// none (GCS ports 6379 and 6380, two teams) get two containers, each
// labelled with its own cluster; a name set in the configuration is kept.
func TestDefaultContainerIsTheClusters(t *testing.T) {
	m := func(name types.String) *clusterModel {
		return &clusterModel{Runtime: &runtimeModel{Container: &containerRuntimeModel{Image: types.StringValue("img:1"), Name: name,
			ShmSize: types.StringNull(), GPUs: types.StringNull(), RunArgs: types.ListNull(types.StringType), RayCommand: types.StringNull()}}}
	}
	for _, c := range []struct {
		name      types.String
		port      int
		wantName  string
		wantOwner string
	}{
		{types.StringNull(), 6379, "ray-node-6379", "gcs-6379"},
		{types.StringNull(), 6380, "ray-node-6380", "gcs-6380"},
		{types.StringValue("team-b"), 6380, "team-b", "gcs-6380"},
	} {
		rt, d := m(c.name).Runtime.runtime(context.Background(), c.port)
		if d.HasError() || rt.Container == nil {
			t.Fatalf("port %d: %v", c.port, d)
		}
		if rt.Container.Name != c.wantName || rt.Container.Owner != c.wantOwner {
			t.Errorf("gcs_port %d, name %s: container %q owned by %q, want %q owned by %q", c.port, c.name, rt.Container.Name, rt.Container.Owner, c.wantName, c.wantOwner)
		}
	}
}
