// Package memfit estimates, before vLLM starts, whether a model's weights
// and the KV cache its max_model_len needs fit in the memory each node gives
// vLLM, computed as vLLM computes them in its release. It is pure: a model's
// config.json, the deployment's flags and environment, and each node's
// memory as the plan read it go in; findings come out.
//
// What it models, and where it is loose, is said next to each rule and in
// the README ("Memory fit"). The principle: where vLLM's own figure is not
// knowable before it starts (the activations' peak, the process's own
// footprint), the estimate takes the side that refuses less: a deployment
// is refused only when it cannot fit even on the generous side.
package memfit

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Model is what vLLM sizes a request's KV cache by, from the model's
// config.json (transformers' names; a multimodal model's text_config).
type Model struct {
	Layers, KVHeads, HeadDim int
	DType                    string // the config's dtype (torch_dtype before transformers 4.56)
	MaxPositions             int    // max_position_embeddings; 0 unknown
	// NotModeled says why the estimate does not apply to this model's
	// attention (latent attention, sliding windows, state-space layers: vLLM
	// sizes their caches otherwise, smaller than full attention would be);
	// "" for plain full attention.
	NotModeled string
}

// ParseConfig reads a model's config.json.
func ParseConfig(b []byte) (Model, error) {
	var top map[string]any
	if err := json.Unmarshal(b, &top); err != nil {
		return Model{}, fmt.Errorf("config.json is not JSON: %w", err)
	}
	c := top
	if tc, ok := top["text_config"].(map[string]any); ok {
		c = tc
	}
	m := Model{
		Layers:       intOf(c, "num_hidden_layers"),
		DType:        strOf(c, "dtype", strOf(c, "torch_dtype", strOf(top, "dtype", strOf(top, "torch_dtype", "")))),
		MaxPositions: intOf(c, "max_position_embeddings"),
	}
	heads := intOf(c, "num_attention_heads")
	m.KVHeads = intOf(c, "num_key_value_heads")
	if m.KVHeads == 0 {
		m.KVHeads = heads // transformers' default: multi-head attention
	}
	m.HeadDim = intOf(c, "head_dim")
	if m.HeadDim == 0 && heads > 0 {
		m.HeadDim = intOf(c, "hidden_size") / heads
	}
	m.NotModeled = notModeled(top, c)
	if m.NotModeled == "" && (m.Layers <= 0 || m.KVHeads <= 0 || m.HeadDim <= 0) {
		m.NotModeled = "its config.json does not give num_hidden_layers, the attention heads and their size"
	}
	return m, nil
}

// notModeled names an attention whose KV cache vLLM sizes otherwise than
// layers x KV heads x head size (vLLM 0.32.0 vllm/v1/kv_cache_interface.py:
// MLAAttentionSpec, SlidingWindowSpec, MambaSpec): those caches are
// smaller, so a full-attention estimate would refuse what serves.
func notModeled(top, c map[string]any) string {
	switch {
	case c["kv_lora_rank"] != nil:
		return "it uses multi-head latent attention (kv_lora_rank)"
	case c["sliding_window"] != nil && c["use_sliding_window"] != false:
		return "it has sliding-window attention layers"
	case !allFull(c["layer_types"]) || c["layers_block_type"] != nil || c["hybrid_override_pattern"] != nil:
		return "its layers are not all full attention (layer_types)"
	case strings.Contains(fmt.Sprint(top["model_type"]), "mamba"), c["ssm_cfg"] != nil, c["state_size"] != nil:
		return "it has state-space (Mamba) layers"
	}
	return ""
}

// allFull: no layer_types, or every layer "full_attention" (Qwen3 lists
// them so).
func allFull(v any) bool {
	if v == nil {
		return true
	}
	l, ok := v.([]any)
	if !ok {
		return false
	}
	for _, t := range l {
		if t != "full_attention" {
			return false
		}
	}
	return true
}

func intOf(m map[string]any, k string) int {
	if f, ok := m[k].(float64); ok && f > 0 && f < 1<<40 {
		return int(f)
	}
	return 0
}

func strOf(m map[string]any, k, def string) string {
	if s, ok := m[k].(string); ok && s != "" {
		return s
	}
	return def
}

// dtypeBytes is the size of one element of a torch dtype as a config or a
// flag names it; 0 when unknown.
func dtypeBytes(d string) int {
	switch strings.TrimPrefix(strings.ToLower(d), "torch.") {
	case "float32", "float", "fp32":
		return 4
	case "float16", "half", "fp16", "bfloat16", "bf16":
		return 2
	case "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "int8", "uint8":
		return 1
	}
	return 0
}

// WeightBytes is the size of the weights vLLM loads from a model
// directory's listing (path -> size): its top-level *.safetensors (without
// Mistral's consolidated copy where the sharded files are there too), else
// its PyTorch files. vLLM prefers safetensors when both are present
// (vllm/model_executor/model_loader/default_loader.py, 0.32.0).
func WeightBytes(files map[string]int64) int64 {
	var st, stAll, pt int64
	for name, n := range files {
		if strings.Contains(name, "/") {
			continue
		}
		switch {
		case strings.HasSuffix(name, ".safetensors"):
			stAll += n
			if !strings.HasPrefix(name, "consolidated") {
				st += n
			}
		case strings.HasSuffix(name, ".bin") || strings.HasSuffix(name, ".pt") || strings.HasSuffix(name, ".pth"):
			pt += n
		}
	}
	switch {
	case st > 0:
		return st
	case stAll > 0:
		return stAll
	}
	return pt
}
