package memfit

import (
	"strconv"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
)

// The lab's tiny Llama (internal/lab): 2 layers, 2 KV heads of 64, float32.
const tinyConfig = `{"architectures": ["LlamaForCausalLM"], "dtype": "float32", "head_dim": 64, "hidden_size": 256,
 "max_position_embeddings": 512, "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2}`

func tiny(t *testing.T) Model {
	t.Helper()
	m, err := ParseConfig([]byte(tinyConfig))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func settings(t *testing.T, tp int, args []string, env map[string]string) Settings {
	t.Helper()
	s, err := ParseSettings(tp, 1, args, env)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const gib30 = int64(1) << 30

// cpuNode: one 24 GiB CPU node (the lab's) with avail of it available.
func cpuNode(avail int64) []Node {
	return []Node{{Name: "spark1", Memory: nodefacts.Memory{Total: 24 * gib30, Available: avail}}}
}

func TestParseConfig(t *testing.T) {
	m := tiny(t)
	if m.Layers != 2 || m.KVHeads != 2 || m.HeadDim != 64 || m.DType != "float32" || m.MaxPositions != 512 || m.NotModeled != "" {
		t.Fatalf("tiny: %+v", m)
	}
	cases := map[string]string{
		// Defaults: KV heads = attention heads, head size = hidden / heads, torch_dtype.
		`{"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096, "torch_dtype": "bfloat16"}`: "32 32 128 bfloat16 ",
		// A multimodal model's text_config.
		`{"model_type": "llava", "text_config": {"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512}, "torch_dtype": "float16"}`: "4 2 64 float16 ",
		// Qwen3 lists every layer's type, all full attention: modeled.
		`{"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "layer_types": ["full_attention", "full_attention"], "sliding_window": 4096, "use_sliding_window": false}`: "2 2 64  ",
		`{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "layer_types": ["sliding_attention", "full_attention"]}`:                                                                             "2 4 64  its layers are not all full attention (layer_types)",
		`{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "kv_lora_rank": 512}`:                                                                                                                "2 4 64  it uses multi-head latent attention (kv_lora_rank)",
		`{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "sliding_window": 4096}`:                                                                                                             "2 4 64  it has sliding-window attention layers",
		`{"model_type": "mamba2", "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64}`:                                                                                                             "2 4 64  it has state-space (Mamba) layers",
		`{"model_type": "x"}`: "0 0 0  its config.json does not give num_hidden_layers, the attention heads and their size",
	}
	for in, want := range cases {
		m, err := ParseConfig([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join([]string{itoa(m.Layers), itoa(m.KVHeads), itoa(m.HeadDim), m.DType, m.NotModeled}, " ")
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", in, got, want)
		}
	}
	if _, err := ParseConfig([]byte("{")); err == nil {
		t.Error("a config that is not JSON parsed")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestParseSettings(t *testing.T) {
	s := settings(t, 2, []string{"--max_model_len=4k", "--dtype", "bfloat16", "--kv-cache-dtype", "fp8", "--block-size", "32",
		"--gpu-memory-utilization", "0.8", "--kv-cache-memory-bytes", "2G", "--enforce-eager"}, nil)
	if s.MaxModelLen != 4000 || s.DType != "bfloat16" || s.KVDType != "fp8" || s.BlockSize != 32 || s.GPUUtil != 0.8 ||
		s.KVBytes != 2<<30 || s.KVFrom != "--kv-cache-memory-bytes" || s.TP != 2 || s.PP != 1 {
		t.Fatalf("%+v", s)
	}
	// VLLM_CPU_KVCACHE_SPACE wins over the flag (vllm/platforms/cpu.py).
	s = settings(t, 1, []string{"--kv-cache-memory-bytes", "1M"}, map[string]string{"VLLM_CPU_KVCACHE_SPACE": "3"})
	if s.KVBytes != 3<<30 || s.KVFrom != "VLLM_CPU_KVCACHE_SPACE in env" {
		t.Fatalf("env over flag: %+v", s)
	}
	if s := settings(t, 1, []string{"--max-model-len", "auto"}, nil); s.MaxModelLen != -1 {
		t.Fatalf("auto: %+v", s)
	}
	for _, bad := range [][]string{{"--max-model-len", "1.5K"}, {"--gpu-memory-utilization", "1.5"}, {"--block-size=x"}} {
		name, _, _ := strings.Cut(bad[0], "=")
		if _, err := ParseSettings(1, 1, bad, nil); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if _, err := ParseSettings(1, 1, nil, map[string]string{"VLLM_CPU_KVCACHE_SPACE": "1.5"}); err == nil {
		t.Error("a fractional VLLM_CPU_KVCACHE_SPACE parsed")
	}
}

func TestHumanInt(t *testing.T) {
	for in, want := range map[string]int64{"512": 512, "1k": 1000, "1K": 1024, "25.6k": 25600, "2M": 2 << 20, "1g": 1e9} {
		if got, err := HumanInt(in); err != nil || got != want {
			t.Errorf("%s: %d %v", in, got, err)
		}
	}
}

// The lab's arithmetic, as vLLM 0.32.0's CPU build does it: a page is 128
// tokens x 2 KV heads x (64+64) x 4 bytes = 128 KiB per layer; one request
// of 384 tokens takes 3 blocks x 2 layers, and one block across the layers
// is held back: 1 MiB exactly.
func TestKVTheLabsTinyModel(t *testing.T) {
	e, ok := KV(tiny(t), settings(t, 1, []string{"--dtype", "float32", "--max-model-len", "384"}, nil), "0.32.0+cpu")
	if !ok || e.BlockSize != 128 || e.PerToken != 2048 || e.Need != 768<<10 || e.Reserved != 256<<10 {
		t.Fatalf("%+v", e)
	}
	if n := e.FitsTokens(1 << 20); n != 384 {
		t.Errorf("1 MiB holds %d tokens, want 384", n)
	}
	// Tensor parallel 2 splits the KV heads.
	e2, _ := KV(tiny(t), settings(t, 2, []string{"--dtype", "float32", "--max-model-len", "384"}, nil), "0.32.0+cpu")
	if e2.Need != e.Need/2 {
		t.Errorf("TP=2 needs %d, want %d", e2.Need, e.Need/2)
	}
	// --dtype auto on a float32 checkpoint: the smaller (16-bit) size.
	e3, _ := KV(tiny(t), settings(t, 1, []string{"--max-model-len", "384"}, nil), "0.32.0+cpu")
	if e3.PerToken != 1024 {
		t.Errorf("auto dtype: %d bytes per token, want 1024", e3.PerToken)
	}
}

func TestCheck(t *testing.T) {
	f32 := []string{"--dtype", "float32"}
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		version string
		nodes   []Node
		own     bool
		weights int64
		want    string // "" fits; else the problems' summaries, "|"-joined, warnings prefixed "w:"
	}{
		{name: "just inside the explicit budget", args: append(f32, "--max-model-len", "384", "--kv-cache-memory-bytes", "1M"), version: "0.32.0+cpu", nodes: cpuNode(20 * gib30)},
		{name: "one block over", args: append(f32, "--max-model-len", "385", "--kv-cache-memory-bytes", "1M"), version: "0.32.0+cpu", nodes: cpuNode(20 * gib30),
			want: "max_model_len does not fit in the KV cache"},
		{name: "the env's GiB is not free: another deployment holds it", args: append(f32, "--max-model-len", "256"), env: map[string]string{"VLLM_CPU_KVCACHE_SPACE": "12"},
			version: "0.32.0+cpu", nodes: cpuNode(11 * gib30), want: "The KV cache asked for is not free on the node"},
		{name: "the same, our own server restarting", args: append(f32, "--max-model-len", "256"), env: map[string]string{"VLLM_CPU_KVCACHE_SPACE": "12"},
			version: "0.32.0+cpu", nodes: cpuNode(11 * gib30), own: true},
		{name: "0.11's CPU check of free memory was not read", args: append(f32, "--max-model-len", "256"), env: map[string]string{"VLLM_CPU_KVCACHE_SPACE": "12"},
			version: "0.11.0+cpu", nodes: cpuNode(11 * gib30)},
		{name: "no budget set on 0.32 CPU: 0.92 of the total is not free", args: append(f32, "--max-model-len", "256"), version: "0.32.0+cpu", nodes: cpuNode(20 * gib30),
			want: "Less memory is free on the node than vLLM reserves"},
		{name: "no budget set, utilization that is free", args: append(f32, "--max-model-len", "256", "--gpu-memory-utilization", "0.5"), version: "0.32.0+cpu", nodes: cpuNode(20 * gib30)},
		{name: "0.11 CPU default 4 GiB", args: append(f32, "--max-model-len", "512"), version: "0.11.0+cpu", nodes: cpuNode(20 * gib30)},
		{name: "VLLM_CPU_KVCACHE_SPACE=0 is an empty cache", args: append(f32, "--max-model-len", "256"), env: map[string]string{"VLLM_CPU_KVCACHE_SPACE": "0"},
			version: "0.32.0+cpu", nodes: cpuNode(20 * gib30), want: "No memory is left for the KV cache"},
		{name: "auto max_model_len", args: []string{"--max-model-len", "auto", "--kv-cache-memory-bytes", "1K"}, version: "0.32.0+cpu", nodes: cpuNode(20 * gib30)},
		{name: "no budget left at all", args: append(f32, "--max-model-len", "256", "--gpu-memory-utilization", "0.1"), version: "0.32.0",
			nodes: []Node{{Name: "spark1", Memory: nodefacts.Memory{GPUs: []nodefacts.GPUMemory{{Total: 8 * gib30, Free: 8 * gib30}}}}}, weights: 2 * gib30,
			want: "No memory is left for the KV cache"},
		{name: "GPU: the roomiest GPU is not free enough", args: append(f32, "--max-model-len", "256"), version: "0.32.0",
			nodes: []Node{{Name: "a", Memory: nodefacts.Memory{GPUs: []nodefacts.GPUMemory{{Total: 80 * gib30, Free: 40 * gib30}}}},
				{Name: "b", Memory: nodefacts.Memory{GPUs: []nodefacts.GPUMemory{{Total: 80 * gib30, Free: 60 * gib30}}}}},
			want: "Less memory is free on the node than vLLM reserves"},
		{name: "GPU: one node has it free", args: append(f32, "--max-model-len", "256"), version: "0.32.0",
			nodes: []Node{{Name: "a", Memory: nodefacts.Memory{GPUs: []nodefacts.GPUMemory{{Total: 80 * gib30, Free: 40 * gib30}}}},
				{Name: "b", Memory: nodefacts.Memory{GPUs: []nodefacts.GPUMemory{{Total: 80 * gib30, Free: 79 * gib30}}}}}},
		{name: "GPU: little room is a warning", args: append(f32, "--max-model-len", "512", "--gpu-memory-utilization", "0.42"), version: "0.33.0",
			nodes: []Node{{Name: "a", Memory: nodefacts.Memory{GPUs: []nodefacts.GPUMemory{{Total: 5 << 20, Free: 5 << 20}}}}}, weights: 1 << 20,
			want: "w:max_model_len fits the KV cache with little room"},
		{name: "unified memory (GB10): the system's figures", args: append(f32, "--max-model-len", "256"), version: "0.32.0",
			nodes: []Node{{Name: "gb10", Memory: nodefacts.Memory{Total: 120 * gib30, Available: 60 * gib30, GPUs: []nodefacts.GPUMemory{{}}}}},
			want:  "Less memory is free on the node than vLLM reserves"},
		{name: "GPU without nvidia-smi figures: not judged", args: append(f32, "--max-model-len", "256"), version: "0.32.0", nodes: cpuNode(1 * gib30)},
		{name: "0.34's default utilization was not read", args: append(f32, "--max-model-len", "256"), version: "0.34.0",
			nodes: []Node{{Name: "a", Memory: nodefacts.Memory{GPUs: []nodefacts.GPUMemory{{Total: 80 * gib30, Free: 1 * gib30}}}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, probs := Check(Deployment{Model: tiny(t), Settings: settings(t, 1, c.args, c.env), Weights: c.weights, VLLMVersion: c.version, Nodes: c.nodes, OwnRunning: c.own})
			var got []string
			for _, p := range probs {
				got = append(got, map[bool]string{true: "w:"}[p.Warning]+p.Summary)
				if !strings.Contains(p.Detail, "Fix:") {
					t.Errorf("no fix named: %s", p.Detail)
				}
			}
			if g := strings.Join(got, "|"); g != c.want {
				t.Errorf("got %q, want %q\n%v", g, c.want, probs)
			}
		})
	}
}

func TestCheckNamesTheFigures(t *testing.T) {
	_, probs := Check(Deployment{Model: tiny(t), Settings: settings(t, 1, []string{"--dtype", "float32", "--max-model-len", "512", "--kv-cache-memory-bytes", "1M"}, nil),
		VLLMVersion: "0.32.0+cpu", Nodes: cpuNode(20 * gib30)})
	if len(probs) != 1 {
		t.Fatal(probs)
	}
	for _, want := range []string{"max_model_len 512", "1.2 MiB", "2.0 KiB per token", "1.0 MiB", "--max-model-len 384 or less", "--kv-cache-memory-bytes"} {
		if !strings.Contains(probs[0].Detail, want) {
			t.Errorf("detail lacks %q: %s", want, probs[0].Detail)
		}
	}
}

func TestWeightBytes(t *testing.T) {
	for _, c := range []struct {
		files map[string]int64
		want  int64
	}{
		{map[string]int64{"model-00001.safetensors": 10, "model-00002.safetensors": 5, "pytorch_model.bin": 15, "config.json": 1}, 15},
		{map[string]int64{"consolidated.safetensors": 20, "model.safetensors": 20}, 20},
		{map[string]int64{"consolidated.safetensors": 20}, 20},
		{map[string]int64{"pytorch_model.bin": 7, "original/model.pth": 9}, 7},
	} {
		if got := WeightBytes(c.files); got != c.want {
			t.Errorf("%v: %d, want %d", c.files, got, c.want)
		}
	}
}
