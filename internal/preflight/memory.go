package preflight

import (
	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/memfit"
)

// MemoryFit (D32): the model's weights and the KV cache one request of
// max_model_len needs fit in what each node gives vLLM, as vLLM computes
// both (internal/memfit, with the release's sources cited there). It is
// judged where the model's config.json was read (a local directory or an
// offline hub snapshot, on the head), on the nodes that may host a rank,
// with what every other process and deployment on them holds counted.
func MemoryFit(d Deployment, hosts []ClusterNode) []finding.Finding {
	listing, ok := d.Listings[d.HeadName]
	if !ok || listing.Config == nil {
		return nil
	}
	model, err := memfit.ParseConfig(listing.Config)
	if err != nil {
		return nil // vLLM refuses an unreadable config.json itself, with its own message
	}
	settings, err := memfit.ParseSettings(d.Sizes.TP, d.Sizes.PP, d.ExtraArgs, d.Env)
	if err != nil {
		return []finding.Finding{{Rule: D32, Path: finding.Attr("extra_args"), Summary: "A memory setting vLLM cannot read", Detail: err.Error()}}
	}
	nodes := []memfit.Node{{Name: d.HeadName, Memory: d.HeadFacts.Memory}}
	for _, h := range hosts {
		if h.Name != d.HeadName {
			nodes = append(nodes, memfit.Node{Name: h.Name, Memory: h.Facts.Memory})
		}
	}
	_, problems := memfit.Check(memfit.Deployment{Model: model, Settings: settings, Weights: memfit.WeightBytes(listing.Files),
		VLLMVersion: d.HeadFacts.VLLMVersion, Nodes: nodes, OwnRunning: d.OwnGPUs > 0 || d.Restart})
	return memoryFindings(problems)
}

// memoryFindings turns the estimate's problems into D32 findings.
func memoryFindings(problems []memfit.Problem) []finding.Finding {
	out := make([]finding.Finding, 0, len(problems))
	for _, p := range problems {
		out = append(out, finding.Finding{Rule: D32, Warning: p.Warning, Node: p.Node, Path: finding.Attr(p.Attr), Summary: p.Summary, Detail: p.Detail})
	}
	return out
}
