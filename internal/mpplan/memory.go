package mpplan

import (
	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/memfit"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
)

// D32 is the memory fit (preflight.MemoryFit on the Ray path).
const D32 = preflight.D32

// MemoryFit (D32) judges every node on its own: in this mode each node
// holds world size / nodes ranks, each with its share of the weights and
// its own KV cache (internal/memfit). The model's config.json is read on
// each node; env is the deployment's (VLLM_CPU_KVCACHE_SPACE). ours: this
// deployment runs now, so the memory its ranks hold is not judged as
// another's.
func MemoryFit(s Spec, env map[string]string, seen map[string]Seen, ours bool) []finding.Finding {
	if len(s.Nodes) == 0 || s.WorldSize()%len(s.Nodes) != 0 {
		return nil // D25 refuses the shape
	}
	settings, err := memfit.ParseSettings(s.TP, s.PP, s.ExtraArgs, env)
	if err != nil {
		return []finding.Finding{{Rule: D32, Path: finding.Attr("extra_args"), Summary: "A memory setting vLLM cannot read", Detail: err.Error()}}
	}
	var out []finding.Finding
	for _, n := range s.Nodes {
		sn, ok := seen[n.Name]
		if !ok || sn.ModelConfig == nil {
			continue
		}
		model, err := memfit.ParseConfig(sn.ModelConfig)
		if err != nil {
			continue // vLLM refuses an unreadable config.json with its own message
		}
		_, problems := memfit.Check(memfit.Deployment{Model: model, Settings: settings, Weights: memfit.WeightBytes(sn.ModelWeights),
			VLLMVersion: sn.Facts.VLLMVersion, Nodes: []memfit.Node{{Name: n.Name, Memory: sn.Facts.Memory}},
			OwnRunning: ours, RanksOnNode: s.WorldSize() / len(s.Nodes)})
		for _, p := range problems {
			if p.Node == "" && len(out) > 0 {
				continue // a problem of the settings alone is said once
			}
			out = append(out, finding.Finding{Rule: D32, Warning: p.Warning, Node: p.Node, Path: finding.Attr(p.Attr), Summary: p.Summary, Detail: p.Detail})
		}
	}
	return out
}
