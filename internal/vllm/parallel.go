package vllm

import (
	"fmt"
	"strconv"
	"strings"
)

// Parallel is what the plan's rules read out of a deployment's extra_args:
// the data-parallel and context-parallel settings that change how many GPUs
// vLLM asks Ray for and where it pins them, and the flag that turns
// environment warnings into startup failures. Spellings are vLLM 0.32.0's
// (vllm/engine/arg_utils.py L1180-1260: -dcp, -pcp, -dp, -dpa, -dpb; argparse
// takes "--flag value" and "--flag=value").
type Parallel struct {
	DP        int    // --data-parallel-size / -dp; 1 when absent
	DPBackend string // --data-parallel-backend / -dpb: "mp" (vLLM's default) or "ray"
	DPAddress string // --data-parallel-address / -dpa; "" when absent
	PCP       int    // --prefill-context-parallel-size / -pcp; 1 when absent
	// FailOnEnviron: --fail-on-environ-validation (vLLM 0.33.0,
	// vllm/engine/arg_utils.py L1933): an environment warning stops vLLM.
	FailOnEnviron bool
}

// DPOverRay reports whether data parallel ranks are placed through Ray.
func (p Parallel) DPOverRay() bool { return p.DPBackend == "ray" }

// ParseParallel reads extra_args. A size that is not a positive integer is
// an error naming the flag (vLLM's argparse would refuse it at startup).
func ParseParallel(extra []string) (Parallel, error) {
	p := Parallel{DP: 1, PCP: 1, DPBackend: "mp"}
	for i := 0; i < len(extra); i++ {
		flag, val, hasEq := strings.Cut(extra[i], "=")
		value := func() string {
			if hasEq {
				return val
			}
			if i+1 < len(extra) {
				i++
				return extra[i]
			}
			return ""
		}
		var err error
		switch flag {
		case "--data-parallel-size", "-dp":
			p.DP, err = positive(flag, value())
		case "--prefill-context-parallel-size", "-pcp":
			p.PCP, err = positive(flag, value())
		case "--data-parallel-backend", "-dpb":
			p.DPBackend = value()
		case "--data-parallel-address", "-dpa":
			p.DPAddress = value()
		case "--fail-on-environ-validation":
			p.FailOnEnviron = !hasEq || !strings.EqualFold(val, "false")
		}
		if err != nil {
			return Parallel{}, err
		}
	}
	return p, nil
}

func positive(flag, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("extra_args %s %q is not a positive integer", flag, s)
	}
	return n, nil
}
