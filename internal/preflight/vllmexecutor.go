package preflight

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/pyversion"
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
	// Switchable: the build is known to have both executors, so the
	// variable picks one (0.20.x-0.32.x, or a build whose envs.py says so).
	Switchable bool
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
	firstPin       = []int{0, 5, 5}
	firstV2        = []int{0, 20, 0}
	firstV2Default = []int{0, 21, 0}
	onlyV2         = []int{0, 33, 0}
)

// ParseVLLMVersion reads a vLLM version string as Python's packaging does
// (internal/pyversion): "0.32.0+cpu", "0.12.0.post2", "0.21.0.dev0",
// "0.17.1.dev59+gb6a6e7a52.precompiled", "0.10.1.1+381074ae.nv25.09".
// The rules compare its release (a pre, post, dev or local part counts as
// its release); what a development build really has is read from its own
// source where possible (BuildSource).
func ParseVLLMVersion(v string) (pyversion.Version, bool) {
	parsed, err := pyversion.Parse(v)
	return parsed, err == nil
}

// The executor as a vLLM build's own source on the head defines it
// (nodefacts reads vllm/envs.py and vllm/v1/executor/ without importing
// vLLM). "" when it could not be read. A build from vLLM's main between two
// releases reports the earlier release's next patch (0.20.1.devN) whichever
// side of a change it was built on, so its source is the better witness.
const (
	SourceFlag0      = "flag=0"      // envs.py defines the variable with default "0"
	SourceFlag1      = "flag=1"      // … with default "1"
	SourceV2Only     = "v2-only"     // no variable, RayExecutorV2 present: 0.33.0 and later
	SourceLegacyOnly = "legacy-only" // no variable, no RayExecutorV2: before 0.20.0
)

// Build is the vLLM on the head as the plan read it.
type Build struct {
	Version string // as the node reports it; "" unknown
	Source  string // one of the Source* values; "" unread
}

// ExecutorFlag is the executor variable as vLLM will see it.
type ExecutorFlag struct {
	Value  string
	Set    bool
	Source string // "env" (the deployment's env) or "head" (the environment vLLM inherits on the head)
}

// ResolveExecutor decides, from the vLLM build on the head and the
// executor variable, which Ray executor vllm serve will use and whether it
// pins bundle 0 to node:<ip>. The build's own source, where read, is
// preferred to an inference from its version. An unreadable build is
// assumed to pin unless the variable selects RayExecutorV2 (every release
// from 0.5.5 to 0.20.x pins, and the pin's failure is a silent hang), and
// Why says so. A flag vLLM cannot parse is a diagnostic: vLLM reads it with
// bool(int(...)) (vllm/envs.py) and stops at startup.
func ResolveExecutor(b Build, flag ExecutorFlag) (Executor, []finding.Finding) {
	e := Executor{Version: b.Version}
	v, readable := ParseVLLMVersion(b.Version)
	lines := executorLines(b, v, readable)
	switch lines.kind {
	case SourceLegacyOnly:
		e.Name = ExecutorLegacy
		e.Pinned = !readable || v.AtLeast(firstPin...)
		switch {
		case !readable:
			e.Why = fmt.Sprintf("the vLLM version on the head could not be read (%q) and %s, so the plan assumes the placement pin of vLLM 0.5.5-0.19.x", b.Version, lines.why)
		case !e.Pinned:
			e.Why = fmt.Sprintf("vLLM %s predates the placement pin (added in 0.5.5)", b.Version)
		default:
			e.Why = fmt.Sprintf("vLLM %s has only the legacy Ray executor (%s)", b.Version, lines.why)
		}
		return e, nil
	case SourceV2Only:
		e.Name, e.Pinned = ExecutorV2, false
		e.Why = fmt.Sprintf("vLLM %s has only RayExecutorV2 (%s)", b.Version, lines.why)
		var diags []finding.Finding
		if flag.Set {
			diags = append(diags, finding.Finding{Rule: D18, Warning: true, Path: flagAttr(flag),
				Summary: ExecutorEnv + " has no effect on this vLLM",
				Detail: fmt.Sprintf("%s = %q (%s), but vLLM %s removed the variable and the legacy Ray executor: it always runs "+
					"RayExecutorV2. Remove the variable.", ExecutorEnv, flag.Value, flagSource(flag), b.Version)})
		}
		return e, diags
	}
	val, src := lines.def, fmt.Sprintf("%s unset: %s", ExecutorEnv, lines.why)
	if flag.Set {
		val, src = flag.Value, fmt.Sprintf("%s=%s, %s", ExecutorEnv, flag.Value, flagSource(flag))
	}
	n, err := strconv.Atoi(strings.TrimSpace(val))
	if err != nil {
		e.Name, e.Pinned, e.Why = ExecutorLegacy, true, src
		return e, []finding.Finding{{Rule: D18, Path: flagAttr(flag), Summary: "Invalid " + ExecutorEnv,
			Detail: fmt.Sprintf("%s = %q (%s) is not an integer. vLLM %s reads it with bool(int(...)) (vllm/envs.py) and "+
				"fails at startup. Use \"1\" for RayExecutorV2 or \"0\" for the legacy executor.", ExecutorEnv, flag.Value, flagSource(flag), b.Version)}}
	}
	e.Switchable = readable || b.Source != ""
	e.Name, e.Pinned = ExecutorV2, false
	if n == 0 {
		e.Name, e.Pinned = ExecutorLegacy, true
	}
	e.Why = src
	return e, nil
}

// lines is which executors a build has: kind is SourceLegacyOnly,
// SourceV2Only, or "" for both (then def is the variable's default); why
// says how the plan knows.
type lines struct{ kind, def, why string }

func executorLines(b Build, v pyversion.Version, readable bool) lines {
	switch b.Source {
	case SourceFlag0, SourceFlag1:
		def := strings.TrimPrefix(b.Source, "flag=")
		return lines{def: def, why: fmt.Sprintf("the head's vLLM %s defines it with default %s in its own vllm/envs.py", b.Version, def)}
	case SourceV2Only:
		return lines{kind: SourceV2Only, why: "read from its own source: no executor variable, vllm/v1/executor/ray_executor_v2.py present"}
	case SourceLegacyOnly:
		if readable && !v.AtLeast(firstV2...) {
			return lines{kind: SourceLegacyOnly, why: "RayExecutorV2 arrived in 0.20.0"}
		}
		return lines{kind: SourceLegacyOnly, why: "read from its own source: no executor variable, no RayExecutorV2"}
	}
	switch {
	case !readable:
		// Nothing known: the legacy default, which pins, unless the
		// variable (honoured below) picks RayExecutorV2.
		return lines{def: "0", why: fmt.Sprintf("the vLLM version on the head could not be read (%q), so the plan assumes the legacy executor, whose placement pin vLLM 0.5.5-0.20.x have by default", b.Version)}
	case !v.AtLeast(firstV2...):
		return lines{kind: SourceLegacyOnly, why: "RayExecutorV2 arrived in 0.20.0"}
	case v.AtLeast(onlyV2...):
		return lines{kind: SourceV2Only, why: "0.33.0 removed the legacy executor"}
	}
	def := "0"
	if v.AtLeast(firstV2Default...) {
		def = "1"
	}
	why := fmt.Sprintf("vLLM %s defaults it to %s", b.Version, def)
	if v.Dev != nil {
		why += fmt.Sprintf(" (inferred from the version of a development build, whose own source could not be read: a build from main between %s and the next release reports %s.devN on either side of a change)",
			v.ReleaseString(), v.ReleaseString())
	}
	return lines{def: def, why: why}
}

func flagSource(f ExecutorFlag) string {
	if f.Source == "head" {
		return "from the environment vllm serve inherits on the head"
	}
	return "from env"
}

func flagAttr(f ExecutorFlag) finding.Path {
	if f.Source == "env" {
		return finding.Attr("env")
	}
	return nil
}
