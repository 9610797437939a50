package resources

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/mpdeploy"
	"github.com/lab-infra/terraform-provider-spark/internal/mpplan"
)

// fabric_gbps is planned from the state while the nodes measured stay the
// same, so a no-change plan with fabric_probe set has no diff; it is null
// without the probe or a second node (nothing to measure, and an unknown
// there would never settle), and unknown otherwise: the apply measures it.
func TestPlanMPFabric(t *testing.T) {
	spec := func(names ...string) mpdeploy.Spec {
		var s mpdeploy.Spec
		for i, n := range names {
			s.Nodes = append(s.Nodes, mpplan.Node{Name: n, Rank: i})
		}
		return s
	}
	measured := func(names ...string) types.Map {
		v := map[string]attr.Value{}
		for _, n := range names {
			v[n] = types.Float64Value(12.5)
		}
		return types.MapValueMust(types.Float64Type, v)
	}
	probe := &fabricProbeModel{MinGbps: types.Float64Value(1)}
	for _, c := range []struct {
		name  string
		state *mpModel
		probe *fabricProbeModel
		spec  mpdeploy.Spec
		want  string // "null", "unknown" or "state"
	}{
		{"no probe", &mpModel{FabricGbps: measured("b")}, nil, spec("a", "b"), "null"},
		{"one node", nil, probe, spec("a"), "null"},
		{"created", nil, probe, spec("a", "b"), "unknown"},
		{"probe just set", &mpModel{FabricGbps: types.MapNull(types.Float64Type)}, probe, spec("a", "b"), "unknown"},
		{"unchanged", &mpModel{FabricGbps: measured("b", "c")}, probe, spec("a", "c", "b"), "state"},
		{"a node added", &mpModel{FabricGbps: measured("b")}, probe, spec("a", "b", "c"), "unknown"},
		{"rank 0 moved", &mpModel{FabricGbps: measured("b")}, probe, spec("b", "a"), "unknown"},
	} {
		plan := &mpModel{FabricProbe: c.probe}
		planMPFabric(c.state, plan, c.spec)
		got := "state"
		switch {
		case plan.FabricGbps.IsNull():
			got = "null"
		case plan.FabricGbps.IsUnknown():
			got = "unknown"
		case !plan.FabricGbps.Equal(c.state.FabricGbps):
			got = "other"
		}
		if got != c.want {
			t.Errorf("%s: fabric_gbps planned %s, want %s", c.name, got, c.want)
		}
	}
}
