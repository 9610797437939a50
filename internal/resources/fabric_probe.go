package resources

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/fabric"
	"github.com/lab-infra/terraform-provider-spark/internal/fabricprobe"
	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// fabricProbeModel is fabric_probe, the same on every multi-node resource.
type fabricProbeModel struct {
	MinGbps types.Float64 `tfsdk:"min_gbps"`
}

// probeEnd is one end of a probed link: where the node is reached and
// the fabric address it is measured on.
type probeEnd struct {
	fabric.End
	Endpoint transport.Endpoint
	Path     finding.Path // the attribute a finding about this node names
}

// probeLinks runs the fabric probe from one node to each of the others
// (one TCP stream each, internal/fabricprobe): each figure, rounded to
// 0.1 Gb/s, by node name, and a D33 finding for each link under floor (0:
// no floor) or that could not be measured. Both are faults of what runs
// now (Now): a scheduled plan sees a link that degraded.
func probeLinks(ctx context.Context, pool *transport.Pool, floor float64, from probeEnd, to []probeEnd) (map[string]attr.Value, []finding.Finding) {
	figures := map[string]attr.Value{}
	var found []finding.Finding
	for _, t := range to {
		gbps, err := fabricprobe.Run(ctx, pool, from.Endpoint, t.Endpoint, t.IP)
		if err != nil {
			found = append(found, finding.Finding{Rule: preflight.D33, Now: true, Node: t.Node, Path: t.Path, Summary: "The fabric probe did not complete",
				Detail: fmt.Sprintf("A TCP stream from %s (%s) to %s (%s), on a port the kernel picks, did not complete: %v. NCCL and gloo open "+
					"such ports between the nodes too. Check a firewall between them, or remove fabric_probe.", from.Node, from.IP, t.Node, t.IP, err)})
			continue
		}
		figures[t.Node] = types.Float64Value(math.Round(gbps*10) / 10)
		if floor > 0 && gbps < floor {
			p := fabric.BelowFloor(from.End, t.End, gbps, floor)
			found = append(found, finding.Finding{Rule: preflight.D33, Now: true, Node: t.Node, Path: t.Path, Summary: p.Summary, Detail: p.Detail})
		}
	}
	return figures, found
}

// plannedFigures is fabric_gbps at plan, on every multi-node resource:
// null when nothing is probed; the figures in state (null: none to keep)
// while they are of the same nodes, so a later plan measures against the
// floor without a diff (the figure moves a little at every run); else
// unknown, measured by the apply (Terraform plans again at apply, and a
// figure planned now would not be the one it measures).
func plannedFigures(probed bool, state types.Map, nodes []string) types.Map {
	switch {
	case !probed:
		return types.MapNull(types.Float64Type)
	case !state.IsNull() && !state.IsUnknown() && slices.Equal(slices.Sorted(maps.Keys(state.Elements())), slices.Sorted(slices.Values(nodes))):
		return state
	default:
		return types.MapUnknown(types.Float64Type)
	}
}

// floor is fabric_probe's min_gbps (0 when unset).
func (p *fabricProbeModel) floor() float64 { return p.MinGbps.ValueFloat64() }

// probeWords names the probe's ends in a resource's own terms.
type probeWords struct {
	from, to, between, each, what, changed string
}

// fabricProbeAttributes are fabric_probe and fabric_gbps, the same on
// every multi-node resource but for the words naming the ends.
func fabricProbeAttributes(w probeWords) (probe, gbps schema.Attribute) {
	probe = schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: fmt.Sprintf("Measure the fabric at every plan: one TCP stream from %s to %s, between %s, for 2 s (about 3 s per "+
			"%s, so it is opt-in). Its figures go to `fabric_gbps`; a link under `min_gbps` is refused at plan (D33), a fault now on a running "+
			"%s, so a scheduled `plan -detailed-exitcode` fails on a link that degraded. One Python stream is a floor that shows a link at "+
			"a fraction of its rate, not the RDMA rate NCCL reaches.", w.from, w.to, w.between, w.each, w.what),
		Attributes: map[string]schema.Attribute{
			"min_gbps": schema.Float64Attribute{Optional: true, Validators: []validator.Float64{float64validator.AtLeast(0)},
				MarkdownDescription: fmt.Sprintf("The least Gb/s each %s's link must carry; unset or 0 measures without a floor.", w.each)},
		}}
	gbps = schema.MapAttribute{Computed: true, ElementType: types.Float64Type,
		MarkdownDescription: fmt.Sprintf("With `fabric_probe`: Gb/s from %s to %s (by name), measured at the plan that created "+
			"the %s or changed %s or the probe; each later plan measures again against `min_gbps` without changing it.", w.from, w.to, w.what, w.changed)}
	return probe, gbps
}
