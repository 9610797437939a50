package mpplan

import (
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
)

// Each node is judged on its own memory, with the ranks it holds: data
// parallel 2 x TP 2 over two nodes puts two ranks, two explicit caches, on
// each.
func TestMemoryFit(t *testing.T) {
	const config = `{"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "dtype": "float32", "max_position_embeddings": 512}`
	seen := func(avail1, avail2 int64) map[string]Seen {
		m := seenPair()
		for name, avail := range map[string]int64{"spark1": avail1, "spark2": avail2} {
			edit(m, name, func(s *Seen) {
				s.Facts.VLLMVersion = "0.32.0+cpu"
				s.Facts.Memory = nodefacts.Memory{Total: 24 << 30, Available: avail}
				s.ModelConfig = []byte(config)
				s.ModelWeights = map[string]int64{"model.safetensors": 1 << 30}
			})
		}
		return m
	}
	s := pair()
	s.ExtraArgs = []string{"--dtype", "float32", "--max-model-len", "256"}
	env := map[string]string{"VLLM_CPU_KVCACHE_SPACE": "8"}
	if got := MemoryFit(s, env, seen(20<<30, 20<<30), false); len(got) != 0 {
		t.Fatalf("8 GiB on nodes with 20: %v", got)
	}
	got := MemoryFit(s, env, seen(20<<30, 6<<30), false)
	if len(got) != 1 || got[0].Node != "spark2" || got[0].Rule != D32 || !strings.Contains(got[0].Detail, "6.00 GiB available") {
		t.Fatalf("spark2 short: %+v", got)
	}
	if got := MemoryFit(s, env, seen(20<<30, 6<<30), true); len(got) != 0 {
		t.Fatalf("its own ranks' memory judged as another's: %v", got)
	}
	s.DP = 2 // two ranks on each node: 2 x (8 + 0.5) GiB
	got = MemoryFit(s, env, seen(16<<30, 20<<30), false)
	if len(got) != 1 || got[0].Node != "spark1" || !strings.Contains(got[0].Detail, "for each of the 2 ranks on the node") {
		t.Fatalf("two ranks on spark1: %+v", got)
	}
	// A max_model_len beyond the budget is said once, not per node.
	s.DP = 1
	s.ExtraArgs = []string{"--dtype", "float32", "--max-model-len", "512", "--kv-cache-memory-bytes", "512K"} // TP=2: 640 KiB per rank
	got = MemoryFit(s, nil, seen(20<<30, 20<<30), false)
	if len(got) != 1 || got[0].Node != "" || !strings.Contains(got[0].Detail, "max_model_len 512") {
		t.Fatalf("said once: %+v", got)
	}
}
