package resources

import (
	"context"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/fabric"
	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/mpdeploy"
	"github.com/lab-infra/terraform-provider-spark/internal/mpplan"
)

// measureFabric runs the fabric probe from rank 0's node to each other node
// over their node_ip, the addresses the ranks use (probeLinks), when
// fabric_probe is set and there are two nodes or more. nil figures: no probe.
func (r *mpResource) measureFabric(ctx context.Context, m *mpModel, spec mpdeploy.Spec) (map[string]attr.Value, []finding.Finding) {
	if m.FabricProbe == nil || len(spec.Nodes) < 2 {
		return nil, nil
	}
	end := func(n mpplan.Node) probeEnd {
		return probeEnd{End: fabric.End{Node: n.Name, IP: n.NodeIP}, Endpoint: spec.Endpoints[n.Name], Path: finding.Attr("nodes").Key(n.Name)}
	}
	var to []probeEnd
	for _, n := range spec.Nodes[1:] {
		to = append(to, end(n))
	}
	return probeLinks(ctx, r.dep.Pool, m.FabricProbe.floor(), end(spec.Nodes[0]), to)
}

// planMPFabric plans fabric_gbps as the cluster's planFabric does: null
// without fabric_probe or a second node; the state's figures while the
// nodes measured are the same (a later plan measures against the floor
// without a diff); else unknown, measured by the apply.
func planMPFabric(state, plan *mpModel, spec mpdeploy.Spec) {
	var others []string
	for _, n := range spec.Nodes[min(1, len(spec.Nodes)):] {
		others = append(others, n.Name)
	}
	slices.Sort(others)
	switch {
	case plan.FabricProbe == nil || len(spec.Nodes) < 2:
		plan.FabricGbps = types.MapNull(types.Float64Type)
	case state != nil && !state.FabricGbps.IsNull() && !state.FabricGbps.IsUnknown() &&
		slices.Equal(slices.Sorted(maps.Keys(state.FabricGbps.Elements())), others):
		plan.FabricGbps = state.FabricGbps
	default:
		plan.FabricGbps = types.MapUnknown(types.Float64Type)
	}
}

// applyFabric settles fabric_gbps at apply where the plan could not.
func (r *mpResource) applyFabric(ctx context.Context, m *mpModel, spec mpdeploy.Spec) {
	if !m.FabricGbps.IsUnknown() {
		return
	}
	figures, _ := r.measureFabric(ctx, m, spec)
	if figures == nil || len(figures) != len(spec.Nodes)-1 {
		m.FabricGbps = types.MapNull(types.Float64Type)
		return
	}
	m.FabricGbps = types.MapValueMust(types.Float64Type, figures)
}
