package memfit

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/pyversion"
)

// Node is a node that may run one of the deployment's ranks, with its
// memory as the plan read it.
type Node struct {
	Name   string
	Memory nodefacts.Memory
}

// Deployment is what the estimate looks at.
type Deployment struct {
	Model       Model
	Settings    Settings
	Weights     int64  // bytes of the model's weight files; 0 unknown
	VLLMVersion string // as the head reports it ("0.32.0+cpu" on the CPU build)
	Nodes       []Node // where ranks may run (the head first)
	// OwnRunning: the deployment's own server runs now and would be stopped
	// before the start. What the nodes have free then is not what they have
	// now, so the rules that judge the memory others hold are not applied;
	// those judged by the settings alone are.
	OwnRunning bool
	// RanksOnNode, where it is known (vLLM's own multi-node mode: world
	// size / nodes on each), is how many ranks each node holds: each
	// allocates its own explicit KV cache, and each takes a GPU of its own.
	// 0: not known (Ray places them), one is assumed.
	RanksOnNode int
}

// Problem is one thing the estimate found.
type Problem struct {
	Warning bool
	Node    string // "" for the deployment as a whole
	Attr    string // the attribute to change first ("extra_args", "env")
	Summary string
	Detail  string
}

// Estimate is the KV cache one rank needs, for messages and state.
type Estimate struct {
	PerToken    int64 // bytes of KV cache per token on one rank
	Need        int64 // one request of max_model_len, in whole blocks
	Reserved    int64 // the block vLLM holds back (the null block)
	MaxModelLen int
	BlockSize   int
}

// KV is the KV cache one rank needs for one request of max_model_len, as
// vLLM 0.32.0 computes it: FullAttentionSpec.max_memory_usage_bytes =
// cdiv(max_model_len, block_size) x page_size_bytes per layer
// (vllm/v1/kv_cache_interface.py L596-602), page = block_size x KV heads x
// (head size + value head size) x dtype size (L548-565), KV heads split
// over tensor parallel ranks (at least one each), layers over pipeline
// stages; plus one block across the layers that the block pool holds back
// (check_enough_kv_cache_memory, vllm/v1/core/kv_cache_utils.py
// L1104-1137). ok is false when the estimate does not apply.
func KV(m Model, s Settings, version string) (Estimate, bool) {
	cpu := IsCPUBuild(version)
	if m.NotModeled != "" || s.MaxModelLen < 0 {
		return Estimate{}, false
	}
	elem := kvBytes(m, s)
	if elem == 0 {
		return Estimate{}, false
	}
	e := Estimate{MaxModelLen: s.MaxModelLen, BlockSize: s.BlockSize}
	if e.MaxModelLen == 0 {
		e.MaxModelLen = m.MaxPositions
	}
	if e.MaxModelLen <= 0 {
		return Estimate{}, false
	}
	if e.BlockSize <= 0 {
		// The default block: 128 on the CPU build from 0.32.0
		// (vllm/platforms/cpu.py L292-293); 16 elsewhere (vllm/config/
		// cache.py DEFAULT_BLOCK_SIZE L72), and on 0.11.0's CPU build
		// without IPEX (cpu.py L148; 128 with it: 16 needs less).
		e.BlockSize = 16
		if cpu && atLeast(version, 32) {
			e.BlockSize = 128
		}
	}
	layers := int64(ceilDiv(m.Layers, s.PP))
	heads := int64(max(m.KVHeads/s.TP, 1))
	page := int64(e.BlockSize) * heads * 2 * int64(m.HeadDim) * elem
	e.PerToken = layers * heads * 2 * int64(m.HeadDim) * elem
	e.Need = layers * int64(ceilDiv(e.MaxModelLen, e.BlockSize)) * page
	e.Reserved = layers * page
	return e, true
}

// FitsTokens is the longest request (whole blocks) a KV budget holds.
func (e Estimate) FitsTokens(budget int64) int64 {
	perBlock := e.Reserved // one block across the layers
	if perBlock <= 0 || budget <= e.Reserved {
		return 0
	}
	return (budget - e.Reserved) / perBlock * int64(e.BlockSize)
}

// kvBytes is the KV cache's element size: --kv-cache-dtype, else the
// model's dtype as vLLM resolves "auto". Where the resolution is not
// certain the smaller size is taken (a float32 checkpoint with --dtype auto
// is served in 16 bits on a GPU), so the estimate never needs more than
// vLLM does.
func kvBytes(m Model, s Settings) int64 {
	if s.KVDType != "" && s.KVDType != "auto" {
		return int64(dtypeBytes(s.KVDType))
	}
	d := s.DType
	if d == "" || d == "auto" {
		d = m.DType
		if dtypeBytes(d) == 4 {
			d = "float16"
		}
	}
	return int64(dtypeBytes(d))
}

func ceilDiv(a, b int) int { return (a + max(b, 1) - 1) / max(b, 1) }

// IsCPUBuild: vLLM's CPU build names itself with a "cpu" local version
// ("0.32.0+cpu"); vLLM picks its CPU platform by it.
func IsCPUBuild(version string) bool {
	_, local, _ := strings.Cut(version, "+")
	return strings.Contains(local, "cpu")
}

// defaultUtil is --gpu-memory-utilization's default in the releases read:
// 0.9 in 0.11.0 (vllm/config/cache.py L43), 0.92 in 0.32.0 and 0.33.0
// (vllm/config/cache.py L102); 0.34.0 resolves it at start (None), so
// there, and in releases not read, it is not assumed.
func defaultUtil(version string) (float64, bool) {
	switch {
	case inRelease(version, 11):
		return 0.9, true
	case inRelease(version, 32), inRelease(version, 33):
		return 0.92, true
	}
	return 0, false
}

// Check judges whether the deployment fits. Each rank holds its share of
// the weights and a KV cache; the budget for the KV cache is what vLLM
// would compute in the release on the head:
//
//   - explicit (VLLM_CPU_KVCACHE_SPACE, --kv-cache-memory-bytes): that
//     figure, which must also be free on the node when vLLM allocates it
//     (vllm/v1/worker/cpu_worker.py L212-225, 0.32.0);
//   - the CPU build without it: 0.32.0 takes total x utilization, which
//     must be free at start (cpu_worker.py L72-95), less what the process
//     holds (its weights at least); 0.11.0 takes 4 GiB (vllm/platforms/
//     cpu.py L114-121);
//   - a GPU: total x utilization, which must be free at start (vllm/v1/
//     worker/utils.py request_memory L716-750, 0.32.0), less the weights
//     and the activations' peak (gpu_worker.py L700-745). The peak is not
//     knowable before a start, so the budget here is an upper bound.
func Check(d Deployment) (Estimate, []Problem) {
	cpu := IsCPUBuild(d.VLLMVersion)
	est, ok := KV(d.Model, d.Settings, d.VLLMVersion)
	if !ok {
		return est, nil
	}
	ranks := int64(d.Settings.TP * d.Settings.PP)
	weights := d.Weights / ranks
	util, utilKnown := d.Settings.GPUUtil, d.Settings.GPUUtil > 0
	if !utilKnown {
		util, utilKnown = defaultUtil(d.VLLMVersion)
	}
	var out []Problem
	// The roomiest node judges: a rank may be placed on any hosting node,
	// so a deployment is refused for free memory only when none has it.
	k := int64(max(d.RanksOnNode, 1))
	roomiest, room := roomiestNode(d.Nodes, cpu, int(k))
	// VLLM_CPU_KVCACHE_SPACE=0 is an explicit empty cache on the CPU build
	// (cpu_worker.py compares with None); a GPU reads a 0 as unset
	// (gpu_worker.py L649, "if kv_cache_memory_bytes := ...").
	explicit := d.Settings.KVFrom != "" && (d.Settings.KVBytes > 0 || cpu)
	switch {
	case explicit:
		out = append(out, fitKV(est, d.Settings.KVBytes, true, d.Settings.KVFrom)...)
		if cpu && atLeast(d.VLLMVersion, 32) && !d.OwnRunning && roomiest != "" && k*(d.Settings.KVBytes+weights) > room {
			out = append(out, Problem{Node: roomiest, Attr: attrOf(d.Settings.KVFrom),
				Summary: "The KV cache asked for is not free on the node",
				Detail: fmt.Sprintf("%s asks each rank for a %s KV cache, and its weights take about %s more%s, but of the nodes that may host a rank the one with the most, %s, has %s available as vLLM reads it "+
					"(MemFree + file pages + SReclaimable of NUMA node 0, within the cgroup's limit), other processes and deployments on it counted. "+
					"vLLM would load the weights and then stop: \"Available memory on node 0 ... is less than requested memory for kv\" (vllm/v1/worker/cpu_worker.py, 0.32.0). "+
					"Fix: a smaller %s (with a smaller max_model_len if the cache must hold it), or free memory on %s (stop another deployment there).",
					d.Settings.KVFrom, gib(d.Settings.KVBytes), gib(weights), ranksText(k), roomiest, gib(room), d.Settings.KVFrom, roomiest)})
		}
	case cpu && inRelease(d.VLLMVersion, 11):
		out = append(out, fitKV(est, 4<<30, true, "the CPU build's default 4 GiB (VLLM_CPU_KVCACHE_SPACE unset)")...)
	case !utilKnown, cpu && !atLeast(d.VLLMVersion, 32):
		// A release whose budget was not read: nothing is assumed.
	case roomiest == "":
		// No node's memory was read: nothing to judge the budget by.
	default:
		total := nodeTotal(d.Nodes, roomiest, cpu)
		requested := int64(float64(total) * util)
		if !d.OwnRunning && requested > room {
			out = append(out, Problem{Node: roomiest, Attr: "extra_args",
				Summary: "Less memory is free on the node than vLLM reserves",
				Detail: fmt.Sprintf("vLLM reserves gpu_memory_utilization %.2f of %s (%s) at start, but the most free on a node that may host a rank is %s (node %s), "+
					"other processes and deployments on it counted. vLLM would stop at start: \"... is less than desired %s memory utilization\" (%s). "+
					"Fix: a lower --gpu-memory-utilization in extra_args (at most %.2f here), or free memory on %s (stop another deployment there, or lower its utilization).",
					util, gib(total), gib(requested), gib(room), roomiest, map[bool]string{true: "CPU", false: "GPU"}[cpu],
					map[bool]string{true: "vllm/v1/worker/cpu_worker.py, 0.32.0", false: "vllm/v1/worker/utils.py request_memory, 0.32.0"}[cpu],
					float64(room)/float64(max(total, 1))-0.005, roomiest)})
		}
		out = append(out, fitKV(est, requested-weights, false, fmt.Sprintf("gpu_memory_utilization %.2f of %s less the weights' %s", util, gib(total), gib(weights)))...)
	}
	return est, out
}

// fitKV judges one request of max_model_len against a KV budget
// (vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory, 0.32.0).
// exact: the budget is the figure vLLM uses; else an upper bound, and a
// request within a tenth of it is warned of.
func fitKV(e Estimate, budget int64, exact bool, from string) []Problem {
	attr := "extra_args"
	fix := func() string {
		n := e.FitsTokens(budget)
		s := "Fix: "
		if n > 0 {
			s += fmt.Sprintf("--max-model-len %d or less in extra_args, ", n)
		} else {
			s += "a smaller --max-model-len in extra_args, "
		}
		return s + "a larger KV budget (" + from + "), or more ranks (tensor_parallel_size splits the KV heads) across more nodes."
	}
	need := e.Need + e.Reserved
	switch {
	case budget <= 0:
		return []Problem{{Attr: attr, Summary: "No memory is left for the KV cache",
			Detail: fmt.Sprintf("The KV cache's budget per rank is %s (%s). vLLM would stop after loading the weights: \"No available memory for the cache blocks\" "+
				"(vllm/v1/core/kv_cache_utils.py, 0.32.0). %s", gib(budget), from, fix())}}
	case need > budget:
		return []Problem{{Attr: attr, Summary: "max_model_len does not fit in the KV cache",
			Detail: fmt.Sprintf("One request of max_model_len %d needs %s of KV cache per rank (%s per token, in blocks of %d tokens, and one block vLLM holds back), "+
				"but the budget is %s (%s). vLLM would stop after loading the weights: \"To serve at least one request with the model's max seq len (%d), ... KV cache is needed, "+
				"which is larger than the available KV cache memory\" (vllm/v1/core/kv_cache_utils.py, 0.32.0). %s",
				e.MaxModelLen, gib(need), size(e.PerToken), e.BlockSize, gib(budget), from, e.MaxModelLen, fix())}}
	case !exact && need > budget-budget/10:
		return []Problem{{Warning: true, Attr: attr, Summary: "max_model_len fits the KV cache with little room",
			Detail: fmt.Sprintf("One request of max_model_len %d needs %s of KV cache per rank; the budget is at most %s (%s), and the activations' peak, "+
				"which vLLM measures at start, comes off it. It may not fit. %s", e.MaxModelLen, gib(need), gib(budget), from, fix())}}
	}
	return nil
}

func attrOf(from string) string {
	if strings.HasSuffix(from, " in env") {
		return "env"
	}
	return "extra_args"
}

// atLeast: version is 0.minor or later (vLLM has released only 0.x so far).
func atLeast(version string, minor int) bool {
	v, err := pyversion.Parse(strings.SplitN(version, "+", 2)[0])
	return err == nil && v.AtLeast(0, minor, 0)
}

// inRelease: version is 0.minor.x (every vLLM release so far is 0.x).
func inRelease(version string, minor int) bool {
	return atLeast(version, minor) && !atLeast(version, minor+1)
}

// roomiestNode is the hosting node with the most memory free for a rank:
// on the CPU build, or where nvidia-smi gives no figure (unified memory),
// the node's available memory; else its GPU with the most free.
//
// With k ranks on a node, each on a GPU of its own, a node's figure is its
// k-th roomiest GPU.
func roomiestNode(nodes []Node, cpu bool, k int) (string, int64) {
	type cand struct {
		name string
		free int64
	}
	var cs []cand
	for _, n := range nodes {
		if free, _, ok := nodeFree(n.Memory, cpu, k); ok {
			cs = append(cs, cand{n.Name, free})
		}
	}
	if len(cs) == 0 {
		return "", 0
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].free > cs[b].free })
	return cs[0].name, cs[0].free
}

func nodeTotal(nodes []Node, name string, cpu bool) int64 {
	for _, n := range nodes {
		if n.Name == name {
			_, total, _ := nodeFree(n.Memory, cpu, 1)
			return total
		}
	}
	return 0
}

func nodeFree(m nodefacts.Memory, cpu bool, k int) (free, total int64, ok bool) {
	if !cpu {
		if len(m.GPUs) == 0 {
			return 0, 0, false // no nvidia-smi figures: the GPUs' memory is not known
		}
		var gpus []nodefacts.GPUMemory
		for _, g := range m.GPUs {
			if g.Total > 0 {
				gpus = append(gpus, g)
			}
		}
		if len(gpus) > 0 {
			sort.SliceStable(gpus, func(a, b int) bool { return gpus[a].Free > gpus[b].Free })
			g := gpus[min(k, len(gpus))-1]
			return g.Free, g.Total, true
		}
		// Every GPU without a figure: unified memory, the system's.
	}
	return m.Available, m.Total, m.Total > 0
}

func ranksText(k int64) string {
	if k <= 1 {
		return ""
	}
	return fmt.Sprintf(", for each of the %d ranks on the node", k)
}

func gib(b int64) string { return size(b) }

func size(b int64) string {
	switch {
	case b >= 1<<30 || b <= -(1<<30):
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
