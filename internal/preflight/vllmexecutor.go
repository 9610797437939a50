package preflight

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/go-version"
)

// ExecutorEnv is the variable that picks vLLM's Ray executor in the releases
// that have two.
const ExecutorEnv = "VLLM_USE_RAY_V2_EXECUTOR_BACKEND"

// The Ray executors vLLM runs `--distributed-executor-backend ray` with.
const (
	ExecutorLegacy = "RayDistributedExecutor" // the legacy executor
	ExecutorV2     = "RayExecutorV2"
)

// Executor is what the plan concludes about the executor a deployment's
// vLLM will use, and whether it pins bundle 0 of its placement group to
// node:<get_ip()> — the pin behind the field report.
type Executor struct {
	Version string // vLLM version on the head, as read there ("" unknown)
	Name    string // ExecutorLegacy or ExecutorV2
	Pinned  bool   // bundle 0 carries node:<VLLM_HOST_IP or detected ip>: 0.001
	// Why says where Name came from: the flag's value and its source, or
	// the release's only executor. It goes into diagnostics.
	Why string
}

// The release lines the rules rest on. Every fact was read in vLLM's own
// source, in the release wheels (line numbers of those files):
//
//   - 0.5.5 first pins bundle 0: vllm/executor/ray_utils.py L272/L283,
//     `current_ip = get_ip()` … `placement_group_specs[0][f"node:{current_ip}"] = 0.001`.
//     0.4.0–0.5.4 create plain [{"GPU": 1}] * world_size bundles, no pin
//     (vllm/executor/ray_utils.py, 0.5.0).
//   - 0.12.0–0.19.1: the same pin in vllm/v1/executor/ray_utils.py
//     (0.19.1 L461/L473), one Ray executor only.
//   - 0.20.0 adds RayExecutorV2 (vllm/v1/executor/ray_executor_v2.py L260:
//     initialize_ray_cluster(..., require_gpu_on_driver=False), so no pin; it
//     takes addresses from ray.util.get_node_ip_address()) behind
//     VLLM_USE_RAY_V2_EXECUTOR_BACKEND, default "0" (vllm/envs.py L777-778).
//     The legacy executor keeps require_gpu_on_driver=True, the pin
//     (vllm/v1/executor/ray_utils.py L641/L657).
//   - 0.21.0 flips the default to "1" (vllm/envs.py L786-787); unchanged
//     through 0.32.0 (envs.py L944-945; abstract.py L77-85 picks the class;
//     ray_utils.py L630-643 pins only when require_gpu_on_driver).
//   - 0.33.0 removes the flag and the legacy executor: "ray" is always
//     RayExecutorV2 (vllm/v1/executor/abstract.py L76-79) and
//     initialize_ray_cluster no longer pins (ray_utils.py from L266).
var (
	firstPin       = version.Must(version.NewVersion("0.5.5"))
	firstV2        = version.Must(version.NewVersion("0.20.0"))
	firstV2Default = version.Must(version.NewVersion("0.21.0"))
	onlyV2         = version.Must(version.NewVersion("0.33.0"))
)

// ParseVLLMVersion reads the release out of a vLLM version string:
// "0.32.0+cpu", "0.10.1.1+381074ae.nv25.09" (NVIDIA's builds),
// "0.21.0rc1.dev12+g1234". A pre-release or local build counts as its
// release (a 0.21 development build already has 0.21's executor default).
func ParseVLLMVersion(v string) (*version.Version, bool) {
	parsed, err := version.NewVersion(strings.TrimSpace(v))
	if err != nil {
		return nil, false
	}
	return parsed.Core(), true
}

func atLeast(v, floor *version.Version) bool { return v.GreaterThanOrEqual(floor) }

// ExecutorFlag is the executor variable as vLLM will see it.
type ExecutorFlag struct {
	Value  string
	Set    bool
	Source string // "env" (the deployment's env) or "head" (the environment vLLM inherits on the head)
}

// ResolveExecutor decides, from the vLLM version on the head and the
// executor variable, which Ray executor vllm serve will use and whether it
// pins bundle 0 to node:<ip>. An unreadable version is assumed to pin (every
// release from 0.5.5 to 0.20.x does, and the pin's failure is a silent hang),
// and Why says so. A flag vLLM cannot parse is a diagnostic: vLLM reads it with
// bool(int(...)) (vllm/envs.py) and stops at startup.
func ResolveExecutor(version string, flag ExecutorFlag) (Executor, []Diagnostic) {
	e := Executor{Version: version}
	v, ok := ParseVLLMVersion(version)
	switch {
	case !ok:
		e.Name, e.Pinned = ExecutorLegacy, true
		e.Why = fmt.Sprintf("the vLLM version on the head could not be read (%q), so the plan assumes the placement pin of vLLM 0.5.5-0.20.x", version)
		return e, nil
	case !atLeast(v, firstPin):
		e.Name, e.Pinned = ExecutorLegacy, false
		e.Why = fmt.Sprintf("vLLM %s predates the placement pin (added in 0.5.5)", version)
		return e, nil
	case !atLeast(v, firstV2):
		e.Name, e.Pinned = ExecutorLegacy, true
		e.Why = fmt.Sprintf("vLLM %s has only the legacy Ray executor (RayExecutorV2 arrived in 0.20.0)", version)
		return e, nil
	case atLeast(v, onlyV2):
		e.Name, e.Pinned = ExecutorV2, false
		e.Why = fmt.Sprintf("vLLM %s has only RayExecutorV2 (0.33.0 removed the legacy executor)", version)
		var diags []Diagnostic
		if flag.Set {
			diags = append(diags, Diagnostic{Rule: D18, Warning: true, Attr: flagAttr(flag),
				Summary: ExecutorEnv + " has no effect on this vLLM",
				Detail: fmt.Sprintf("%s = %q (%s), but vLLM %s removed the variable and the legacy Ray executor: it always runs "+
					"RayExecutorV2. Remove the variable.", ExecutorEnv, flag.Value, flagSource(flag), version)})
		}
		return e, diags
	}
	def := "0"
	if atLeast(v, firstV2Default) {
		def = "1"
	}
	val, src := def, fmt.Sprintf("%s unset: vLLM %s defaults it to %s", ExecutorEnv, version, def)
	if flag.Set {
		val, src = flag.Value, fmt.Sprintf("%s=%s, %s", ExecutorEnv, flag.Value, flagSource(flag))
	}
	n, err := strconv.Atoi(strings.TrimSpace(val))
	if err != nil {
		e.Name, e.Pinned, e.Why = ExecutorLegacy, true, src
		return e, []Diagnostic{{Rule: D18, Attr: flagAttr(flag), Summary: "Invalid " + ExecutorEnv,
			Detail: fmt.Sprintf("%s = %q (%s) is not an integer. vLLM %s reads it with bool(int(...)) (vllm/envs.py) and "+
				"fails at startup. Use \"1\" for RayExecutorV2 or \"0\" for the legacy executor.", ExecutorEnv, flag.Value, flagSource(flag), version)}}
	}
	if n != 0 {
		e.Name, e.Pinned = ExecutorV2, false
	} else {
		e.Name, e.Pinned = ExecutorLegacy, true
	}
	e.Why = src
	return e, nil
}

func flagSource(f ExecutorFlag) string {
	if f.Source == "head" {
		return "from the environment vllm serve inherits on the head"
	}
	return "from env"
}

func flagAttr(f ExecutorFlag) []string {
	if f.Source == "env" {
		return []string{"env"}
	}
	return nil
}
