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

// planFabric plans fabric_gbps: null without fabric_probe; what the state
// has where the cluster keeps its workers and the probe (a later plan
// measures against the floor without a diff: the figure moves a little at
// every run); else unknown, measured by the apply (Terraform plans again
// at apply, and a figure planned now would not be the one it measures).
func planFabric(c *clusterPlan) {
	switch {
	case c.plan.FabricProbe == nil:
		c.plan.FabricGbps = types.MapNull(types.Float64Type)
	case !c.creating && c.state != nil && !c.state.FabricGbps.IsNull() && !c.state.FabricGbps.IsUnknown() &&
		slices.Equal(slices.Sorted(maps.Keys(c.state.FabricGbps.Elements())), slices.Sorted(maps.Keys(c.plan.Workers))):
		c.plan.FabricGbps = c.state.FabricGbps
	default:
		c.plan.FabricGbps = types.MapUnknown(types.Float64Type)
	}
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
