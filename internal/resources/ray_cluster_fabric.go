package resources

import (
	"context"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/fabric"
	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
)

// measureFabric runs the fabric probe from the head to each worker over
// the addresses Ray registers (registered: node name -> IP), when
// fabric_probe is set (probeLinks). nil figures: no probe.
func (r *rayClusterResource) measureFabric(ctx context.Context, m *clusterModel, spec raycluster.Spec, registered map[string]string) (map[string]attr.Value, []finding.Finding) {
	if m.FabricProbe == nil {
		return nil, nil
	}
	head := probeEnd{End: fabric.End{Node: raycluster.HeadName, IP: registered[raycluster.HeadName]}, Endpoint: spec.Head.Endpoint}
	var to []probeEnd
	for _, name := range spec.WorkerNames() {
		w := spec.Workers[name]
		to = append(to, probeEnd{End: fabric.End{Node: name, IP: registered[name]}, Endpoint: w.Endpoint, Path: w.Path})
	}
	return probeLinks(ctx, r.mgr.Pool, m.FabricProbe.floor(), head, to)
}

// planFabric plans fabric_gbps (plannedFigures): the state's figures are
// kept only where the cluster is not created anew.
func planFabric(c *clusterPlan) {
	var state types.Map
	if !c.creating && c.state != nil {
		state = c.state.FabricGbps
	}
	c.plan.FabricGbps = plannedFigures(c.plan.FabricProbe != nil, state, slices.Collect(maps.Keys(c.plan.Workers)))
}

// applyFabric settles fabric_gbps at apply where the plan could not
// (values unknown at plan): measured now, the cluster up.
func (r *rayClusterResource) applyFabric(ctx context.Context, m *clusterModel, spec raycluster.Spec) {
	if !m.FabricGbps.IsUnknown() {
		return
	}
	registered := map[string]string{raycluster.HeadName: m.Head.RegisteredIP.ValueString()}
	for name, w := range m.Workers {
		registered[name] = w.RegisteredIP.ValueString()
	}
	figures, _ := r.measureFabric(ctx, m, spec, registered)
	if figures == nil || len(figures) != len(m.Workers) {
		m.FabricGbps = types.MapNull(types.Float64Type)
		return
	}
	m.FabricGbps = types.MapValueMust(types.Float64Type, figures)
}
