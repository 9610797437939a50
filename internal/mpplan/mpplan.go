// Package mpplan is vLLM's own multi-node mode, with no Ray: the
// multiprocessing executor across nodes (`--nnodes`, `--node-rank`,
// `--master-addr`, `--master-port`, and `--headless` on every node but
// rank 0; vLLM PR #23691, first released in 0.11.1). It builds each node's
// command line and environment and holds the rules the plan checks before
// anything starts. Pure: the facts come in as values (internal/mpdeploy
// reads them over SSH), so every rule is table-tested.
package mpplan

import (
	"sort"
	"strconv"
)

// DefaultMasterPort is vLLM's own default for --master-port
// (vllm/config/parallel.py, v0.32.0: `master_port: int = 29501`).
const DefaultMasterPort = 29501

// Node is one node of the deployment as declared.
type Node struct {
	Name string // its key in the resource's `nodes`
	Rank int    // --node-rank
	// NodeIP is the address this node uses on the fabric, given to vLLM as
	// VLLM_HOST_IP: the address its ranks announce to the others.
	NodeIP string
	// Interface is the fabric interface on this node, given as
	// GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME on this node only; "": set
	// neither (torch then takes the interface of the host name's address).
	Interface string
}

// Spec is one deployment, as plain values.
type Spec struct {
	Model      string
	ServedName string // "": the model
	TP, PP     int
	// DP is the data parallel size: DP engines, each of TP x PP ranks,
	// spread over the nodes with the rest (--data-parallel-backend mp); 1
	// or 0: none.
	DP int
	// MasterAddr is --master-addr; "": rank 0's NodeIP.
	MasterAddr string
	MasterPort int
	Port       int    // the API port, on rank 0
	Host       string // the address rank 0's API listens on; "": every address
	ExtraArgs  []string
	Nodes      []Node // in rank order (Sorted)
	// Restart is the supervise policy each rank runs under (supervise.No:
	// none, started detached).
	Restart string
}

// Sorted is nodes in rank order, ties by name (D25 refuses ties).
func Sorted(nodes []Node) []Node {
	out := append([]Node(nil), nodes...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Rank != out[j].Rank {
			return out[i].Rank < out[j].Rank
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Master is the address every rank dials: --master-addr, or rank 0's
// fabric address.
func (s Spec) Master() string {
	if s.MasterAddr != "" {
		return s.MasterAddr
	}
	if len(s.Nodes) > 0 {
		return s.Nodes[0].NodeIP
	}
	return ""
}

// WorldSize is the number of ranks (GPUs, or CPU workers) across all
// nodes: tensor times pipeline times data parallel, which --nnodes must
// divide (vllm/engine/arg_utils.py L2365, v0.32.0: "`--nnodes N` must
// evenly divide the total world size").
func (s Spec) WorldSize() int { return s.TP * s.PP * s.dp() }

func (s Spec) dp() int { return max(s.DP, 1) }

// Argv is the `vllm serve` command line of node n. Rank 0 serves the API;
// every other rank runs `--headless` (no API server, only its workers).
func (s Spec) Argv(vllmCommand string, n Node) []string {
	if vllmCommand == "" {
		vllmCommand = "vllm"
	}
	argv := []string{vllmCommand, "serve", s.Model,
		"--tensor-parallel-size", strconv.Itoa(s.TP),
		"--pipeline-parallel-size", strconv.Itoa(s.PP),
		"--distributed-executor-backend", "mp",
	}
	if s.dp() > 1 {
		// More than one node needs the mp DP backend (arg_utils.py L2349).
		argv = append(argv, "--data-parallel-size", strconv.Itoa(s.DP), "--data-parallel-backend", "mp")
	}
	argv = append(argv,
		"--nnodes", strconv.Itoa(len(s.Nodes)),
		"--node-rank", strconv.Itoa(n.Rank),
		"--master-addr", s.Master(),
		"--master-port", strconv.Itoa(s.MasterPort),
	)
	if n.Rank == 0 {
		argv = append(argv, "--port", strconv.Itoa(s.Port))
		if s.Host != "" {
			argv = append(argv, "--host", s.Host)
		}
		if s.ServedName != "" {
			argv = append(argv, "--served-model-name", s.ServedName)
		}
	} else {
		argv = append(argv, "--headless")
	}
	return append(argv, s.ExtraArgs...)
}

// Env is what node n's vLLM gets besides the user's env: its fabric
// address and, when declared, its fabric interface for gloo and NCCL. Per
// node, because two Sparks cabled on different ports name them
// differently; with no Ray, nothing copies one node's environment to
// another's (the Ray executors do, vLLM's ray_env.py).
func (s Spec) Env(n Node) map[string]string {
	env := map[string]string{}
	if n.NodeIP != "" {
		env["VLLM_HOST_IP"] = n.NodeIP
	}
	if n.Interface != "" {
		env["GLOO_SOCKET_IFNAME"] = n.Interface
		env["NCCL_SOCKET_IFNAME"] = n.Interface
	}
	return env
}
