package preflight

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/pyversion"
)

// ClusterNode is one node of the cluster under a deployment, as the
// cluster's plan in the same run read it: its facts (read where Ray runs on
// it), the address Ray registered or will register, and its GPUs.
type ClusterNode struct {
	Node
	IP   string  // registered, or planned
	GPUs float64 // registered (live table) or planned; -1 when not knowable
}

// Sizes is what one vllm serve asks Ray for. vLLM 0.32.0's world size per
// data-parallel rank is PP x TP x PCP (vllm/config/parallel.py L945-949);
// with the Ray data-parallel backend every rank is placed through Ray.
type Sizes struct {
	TP, PP, PCP, DP int
	DPOverRay       bool
	DPAddress       string // --data-parallel-address; "" means vLLM's get_ip()
}

func atLeastOne(n int) int { return max(n, 1) }

// GPUs is the number of GPU bundles vLLM asks Ray for.
func (s Sizes) GPUs() int {
	return atLeastOne(s.TP) * atLeastOne(s.PP) * atLeastOne(s.PCP) * atLeastOne(s.DP)
}

// describe spells the product out for messages: "tensor_parallel_size 2 x
// pipeline_parallel_size 1 x data parallel 2 = 4".
func (s Sizes) describe() string {
	parts := []string{fmt.Sprintf("tensor_parallel_size %d", atLeastOne(s.TP)), fmt.Sprintf("pipeline_parallel_size %d", atLeastOne(s.PP))}
	if atLeastOne(s.PCP) > 1 {
		parts = append(parts, fmt.Sprintf("prefill context parallel %d", s.PCP))
	}
	if atLeastOne(s.DP) > 1 {
		parts = append(parts, fmt.Sprintf("data parallel %d", s.DP))
	}
	return fmt.Sprintf("%s = %d", strings.Join(parts, " x "), s.GPUs())
}

// HostingNodes are the nodes where vLLM may place a Ray worker actor: the
// head always (vllm serve and its driver run there); the other nodes with
// GPUs unless the legacy executor's pin keeps a placement group that fits
// on the head there (bundle 0 pinned to the head, strategy PACK:
// vllm/v1/executor/ray_utils.py L641-648, 0.32.0). A node whose GPUs are
// not knowable may host one. nodes[0] is the head.
func HostingNodes(nodes []ClusterNode, e Executor, need int) []ClusterNode {
	if len(nodes) == 0 {
		return nil
	}
	head := nodes[0]
	if e.Pinned && head.GPUs >= float64(need) {
		return nodes[:1]
	}
	out := []ClusterNode{head}
	for _, n := range nodes[1:] {
		if n.GPUs != 0 {
			out = append(out, n)
		}
	}
	return out
}

// VLLMOnWorkers (D19): every node that hosts a worker actor imports vLLM
// in Ray's Python there (the actor's class is vLLM's worker), so vLLM must
// be installed on it, in the same version as on the head: without it the
// actor fails at creation ("No module named 'vllm'"), with another version
// the driver and its workers disagree on the classes they exchange.
func VLLMOnWorkers(head Node, hosts []ClusterNode) []finding.Finding {
	want := head.Facts.VLLMVersion
	var out []finding.Finding
	for _, n := range hosts {
		if n.Name == head.Name {
			continue
		}
		got := n.Facts.VLLMVersion
		switch {
		case got == "":
			out = append(out, finding.Finding{Rule: D19, Node: n.Name,
				Summary: "vLLM is not installed on a node that will host a vLLM worker",
				Detail: fmt.Sprintf("%s (%s) has GPUs Ray will place vLLM's workers on, but its Ray's Python has no vllm "+
					"(the head runs vLLM %s). The worker actor would fail at creation with \"No module named 'vllm'\". "+
					"Install vLLM %s on %s where Ray runs (the same Python, or the same container image).",
					n.Name, n.SSHHost, want, want, n.Name)})
		case want != "" && !sameVersion(got, want):
			out = append(out, finding.Finding{Rule: D19, Node: n.Name,
				Summary: "vLLM differs between the head and a node that will host a vLLM worker",
				Detail: fmt.Sprintf("vLLM %s on %s (%s), but %s on the head where vllm serve runs. The head's driver sends "+
					"its workers vLLM's own objects, which only the same release reads back. Install vLLM %s on every node.",
					got, n.Name, n.SSHHost, want, want)})
		}
	}
	return out
}

// sameVersion compares as packaging does (0.32.0+CPU equals 0.32.0+cpu),
// else as text.
func sameVersion(a, b string) bool {
	va, erra := pyversion.Parse(a)
	vb, errb := pyversion.Parse(b)
	if erra != nil || errb != nil {
		return a == b
	}
	return pyversion.Compare(va, vb) == 0
}

// reachesWorkers says whether a variable of the deployment's env reaches
// the worker actors on other nodes, per release:
//   - RayExecutorV2 (0.20.0+) gives each worker every driver variable it
//     lacks (os.environ.setdefault: vllm/v1/executor/ray_executor_v2.py
//     L168-177, ray_env_utils.py L10-20, 0.32.0); a variable the worker's
//     own Ray environment (the cluster's env) sets wins there;
//   - the legacy executor from 0.17.0 copies the variables with the prefixes
//     VLLM_, NCCL_, UCX_, HF_, ... (vllm/ray/ray_env.py L36-44,
//     DEFAULT_ENV_VAR_PREFIXES) and those VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY
//     / VLLM_RAY_EXTRA_ENV_VARS_TO_COPY add;
//   - before 0.17.0 it copies only vLLM's own variables (vllm/ray/ray_env.py,
//     0.16.0: envs.environment_variables).
func reachesWorkers(name string, env, clusterEnv map[string]string, e Executor) bool {
	if e.Name == ExecutorV2 {
		_, own := clusterEnv[name]
		return !own
	}
	v, ok := ParseVLLMVersion(e.Version)
	if !ok || !v.AtLeast(0, 17, 0) {
		return strings.HasPrefix(name, "VLLM_")
	}
	prefixes := []string{"VLLM_", "FLASH_ATTENTION_", "LMCACHE_", "NCCL_", "UCX_", "HF_", "HUGGING_FACE_"}
	prefixes = append(prefixes, csv(env["VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"])...)
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return slices.Contains(csv(env["VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"]), name)
}

func csv(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// WorkerInterfaces (D9, on the deployment): an interface variable of the
// deployment's env that vLLM passes to its workers must name an interface
// on every node that hosts one, carrying that node's Ray address — two
// Sparks cabled on different ports (enp1s0f0np0 on one, enp1s0f1np1 on the
// other) otherwise pass the plan and fail at NCCL or Gloo init. The head is
// checked for every variable (vllm serve's own process reads them).
//
// A worker node's own Ray environment is the cluster's env and, with the
// node's declared interface, NodeInterfaceVars.
func WorkerInterfaces(env, clusterEnv map[string]string, e Executor, head Node, headIP string, hosts []ClusterNode) []finding.Finding {
	out := Interfaces(env, []Node{head}, map[string]string{head.Name: headIP})
	for _, n := range hosts {
		if n.Name == head.Name {
			continue
		}
		own := ownEnv(clusterEnv, n.Node)
		for _, v := range InterfaceVars {
			if val, ok := env[v]; ok && reachesWorkers(v, env, own, e) {
				out = append(out, passedInterface(v, val, e, n)...)
			}
		}
	}
	return out
}

// ownEnv is what a node's Ray environment sets: the cluster's env and, with
// the node's declared interface, NodeInterfaceVars.
func ownEnv(clusterEnv map[string]string, n Node) map[string]string {
	if n.Interface == "" {
		return clusterEnv
	}
	own := map[string]string{}
	maps.Copy(own, clusterEnv)
	for _, v := range NodeInterfaceVars {
		own[v] = n.Interface
	}
	return own
}

// passedInterface checks one interface variable vLLM passes to its worker
// on node n.
func passedInterface(v, val string, e Executor, n ClusterNode) []finding.Finding {
	out := Interfaces(map[string]string{v: val}, []Node{n.Node}, map[string]string{n.Name: n.IP})
	for i := range out {
		out[i].Detail += fmt.Sprintf("\nvLLM %s (%s) passes this variable from vllm serve's environment to its worker on %s.", e.Version, e.Name, n.Name)
		if n.Interface != "" {
			out[i].Detail += fmt.Sprintf(" There it overrides the node's own interface (%q): remove %s from the deployment's env.", n.Interface, v)
		}
	}
	return out
}

// Listing is what a node holds of a model: its files and their sizes.
type Listing = nodefacts.Listing

// Weights (D20): with tensor or pipeline parallel across nodes every
// worker loads the model from its own disk, at the path vllm serve was
// given (the model string reaches the workers as it is). A local path (or a
// Hugging Face snapshot used offline) missing or different on a worker
// passes every other check and fails after the head has loaded, tens of
// minutes into a large model. Files are compared by name and size, the
// head's listing being the reference.
func Weights(model string, head string, hosts []ClusterNode, listings map[string]Listing) []finding.Finding {
	ref, ok := listings[head]
	if !ok {
		return nil
	}
	if ref.Missing || len(ref.Files) == 0 {
		return []finding.Finding{{Rule: D20, Node: head, Path: finding.Attr("model"), Summary: "The model is not on the head",
			Detail: fmt.Sprintf("model = %q: %s on the head has no model files. vLLM would stop at startup. Copy the weights there "+
				"(a spark_model resource does it), or fix the path.", model, ref.Dir)}}
	}
	var out []finding.Finding
	for _, n := range hosts {
		if n.Name == head {
			continue
		}
		l, ok := listings[n.Name]
		if !ok {
			continue
		}
		if l.Missing {
			out = append(out, finding.Finding{Rule: D20, Node: n.Name, Path: finding.Attr("model"), Summary: "The model is missing on a node that will host a vLLM worker",
				Detail: fmt.Sprintf("model = %q: %s does not exist on %s (%s), which will host a vLLM worker; every worker loads the "+
					"weights from its own disk. It would fail after the head has loaded. Copy %s to %s (the same path), or mount "+
					"the same model store on every node.", model, l.Dir, n.Name, n.SSHHost, ref.Dir, n.Name)})
			continue
		}
		if name, why := firstDifference(ref, l); name != "" {
			out = append(out, finding.Finding{Rule: D20, Node: n.Name, Path: finding.Attr("model"), Summary: "The model differs on a node that will host a vLLM worker",
				Detail: fmt.Sprintf("model = %q: on %s (%s) %s/%s %s. Every worker loads the weights from its own disk, so it would "+
					"fail (or load other weights) after the head has loaded. Copy the head's %s to %s again.",
					model, n.Name, n.SSHHost, l.Dir, name, why, ref.Dir, n.Name)})
		}
	}
	return out
}

// firstDifference is the first file (in name order) that the node lacks or
// holds at another size than the head.
func firstDifference(ref, l Listing) (string, string) {
	for _, name := range slices.Sorted(maps.Keys(ref.Files)) {
		size, ok := l.Files[name]
		switch {
		case !ok:
			return name, "is missing"
		case size != ref.Files[name]:
			return name, fmt.Sprintf("has %d bytes, %d on the head", size, ref.Files[name])
		}
	}
	return "", ""
}
