package resources

import (
	"context"

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

// planMPFabric plans fabric_gbps (plannedFigures), for the nodes after
// rank 0's: null without fabric_probe or a second node, as nothing is
// measured then (an unknown would never settle).
func planMPFabric(state, plan *mpModel, spec mpdeploy.Spec) {
	var was types.Map
	if state != nil {
		was = state.FabricGbps
	}
	var others []string
	for _, n := range spec.Nodes[min(1, len(spec.Nodes)):] {
		others = append(others, n.Name)
	}
	plan.FabricGbps = plannedFigures(plan.FabricProbe != nil && len(spec.Nodes) > 1, was, others)
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
