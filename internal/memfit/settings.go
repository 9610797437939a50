package memfit

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Settings is what a deployment tells vLLM that sizes its memory.
type Settings struct {
	TP, PP int
	// MaxModelLen is --max-model-len; 0 = the model's own; -1 = "auto"
	// (vLLM fits it to the memory, so nothing is refused).
	MaxModelLen int
	DType       string // --dtype; "" or "auto" = the model's
	KVDType     string // --kv-cache-dtype; "" or "auto" = the model's
	BlockSize   int    // --block-size; 0 = the platform's default
	// GPUUtil is --gpu-memory-utilization (on the CPU build, the share of
	// the node's memory); 0 = the release's default.
	GPUUtil float64
	// KVBytes is the KV cache asked for explicitly: VLLM_CPU_KVCACHE_SPACE
	// (GiB, the CPU build; it wins over the flag, vLLM 0.32.0
	// vllm/platforms/cpu.py L323-327), else --kv-cache-memory-bytes;
	// KVFrom names which. 0 = none.
	KVBytes int64
	KVFrom  string
}

// ParseSettings reads the flags that size memory from a deployment's
// extra_args (as vLLM's FlexibleArgumentParser reads them: "--flag value"
// or "--flag=value", '_' for '-' in the name) and its environment.
func ParseSettings(tp, pp int, extraArgs []string, env map[string]string) (Settings, error) {
	s := Settings{TP: max(tp, 1), PP: max(pp, 1)}
	for i := 0; i < len(extraArgs); i++ {
		name, val, glued := strings.Cut(extraArgs[i], "=")
		if !strings.HasPrefix(name, "--") {
			continue
		}
		name = "--" + strings.ReplaceAll(name[2:], "_", "-")
		if !glued {
			if i+1 >= len(extraArgs) || !takesValue[name] {
				continue
			}
			i++
			val = extraArgs[i]
		}
		if err := s.set(name, val); err != nil {
			return s, fmt.Errorf("extra_args %s %q: %w", name, val, err)
		}
	}
	if v, ok := env["VLLM_CPU_KVCACHE_SPACE"]; ok && v != "" {
		n, err := strconv.ParseInt(v, 10, 64) // vllm/envs.py: int(...)
		if err != nil || n < 0 {
			return s, fmt.Errorf("env VLLM_CPU_KVCACHE_SPACE %q: vLLM reads a whole number of GiB", v)
		}
		s.KVBytes, s.KVFrom = n<<30, "VLLM_CPU_KVCACHE_SPACE in env"
	}
	return s, nil
}

var takesValue = map[string]bool{"--max-model-len": true, "--dtype": true, "--kv-cache-dtype": true, "--block-size": true,
	"--gpu-memory-utilization": true, "--kv-cache-memory-bytes": true}

func (s *Settings) set(name, val string) error {
	var err error
	switch name {
	case "--max-model-len":
		if val == "auto" || val == "-1" {
			s.MaxModelLen = -1
			return nil
		}
		var n int64
		n, err = HumanInt(val)
		s.MaxModelLen = int(n)
	case "--dtype":
		s.DType = val
	case "--kv-cache-dtype":
		s.KVDType = val
	case "--block-size":
		s.BlockSize, err = strconv.Atoi(val)
	case "--gpu-memory-utilization":
		s.GPUUtil, err = strconv.ParseFloat(val, 64)
		if err == nil && (s.GPUUtil <= 0 || s.GPUUtil > 1) {
			err = fmt.Errorf("vLLM takes a fraction above 0 and at most 1")
		}
	case "--kv-cache-memory-bytes":
		if s.KVFrom == "" {
			s.KVBytes, err = HumanInt(val)
			s.KVFrom = "--kv-cache-memory-bytes"
		}
	}
	return err
}

var humanRE = regexp.MustCompile(`^(\d+(?:\.\d+)?)([kKmMgGtT])$`)

// HumanInt reads a count as vLLM's human_readable_int does (vLLM 0.32.0
// vllm/utils/argparse_utils.py L29-73): "1k" = 1000, "1K" = 1024, decimals
// only with the decimal suffixes.
func HumanInt(v string) (int64, error) {
	v = strings.TrimSpace(v)
	if m := humanRE.FindStringSubmatch(v); m != nil {
		dec := map[string]float64{"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
		bin := map[string]int64{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
		if mult, ok := dec[m[2]]; ok {
			f, _ := strconv.ParseFloat(m[1], 64)
			return int64(math.Floor(f * mult)), nil
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("vLLM allows no decimals with %s", m[2])
		}
		return n * bin[m[2]], nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a count vLLM reads (a number, optionally with k, K, m, M, g, G)")
	}
	return n, nil
}
