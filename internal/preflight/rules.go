package preflight

import "github.com/lab-infra/terraform-provider-spark/internal/finding"

// Rule is the code of one misconfiguration the plan refuses (or warns
// about), before anything starts. The codes are defined here once; the
// README's table "What the plan refuses" lists the same codes with the same
// wording (rules_test.go checks both ways), every diagnostic carries its code,
// and the user sees it at the end of the diagnostic's detail.
// Rule is a rule's code (finding.Rule, which cites it).
type Rule = finding.Rule

// The catalogue. D1-D13 are the design's; D14-D24 were added with the checks;
// D25-D31 are spark_vllm_mp_deployment's (internal/mpplan).
const (
	D1  Rule = "D1"
	D2  Rule = "D2"
	D3  Rule = "D3"
	D4  Rule = "D4"
	D5  Rule = "D5"
	D6  Rule = "D6"
	D7  Rule = "D7"
	D8  Rule = "D8"
	D9  Rule = "D9"
	D10 Rule = "D10"
	D11 Rule = "D11"
	D12 Rule = "D12"
	D13 Rule = "D13"
	D14 Rule = "D14"
	D15 Rule = "D15"
	D16 Rule = "D16"
	D17 Rule = "D17"
	D18 Rule = "D18"
	D19 Rule = "D19"
	D20 Rule = "D20"
	D21 Rule = "D21"
	D22 Rule = "D22"
	D23 Rule = "D23"
	D24 Rule = "D24"
	D25 Rule = "D25"
	D26 Rule = "D26"
	D27 Rule = "D27"
	D28 Rule = "D28"
	D29 Rule = "D29"
	D30 Rule = "D30"
	D31 Rule = "D31"
	D32 Rule = "D32"
	D33 Rule = "D33"
	D34 Rule = "D34"
)

// Rules is the catalogue in order: each code with what it refuses.
var Rules = []struct {
	Rule Rule
	What string
}{
	{D1, "vLLM's placement address (`VLLM_HOST_IP`, `HOST_IP` on vLLM 0.4.x-0.6.4, else its own detection) is not the `node:` address Ray registered for the head (the field report): an error where the vLLM on the head pins its placement group to it (or, before 0.5.5, fails at startup), a warning where it does not; with data parallel over Ray (`--data-parallel-backend ray`), the DP master address is an error in every release"},
	{D2, "`VLLM_HOST_IP` (`host_ip`, `env.VLLM_HOST_IP`) is a hostname, malformed or loopback, or `host_ip` and `env.VLLM_HOST_IP` disagree"},
	{D3, "`node_ip` is not bound on its node"},
	{D4, "`node_ip` is loopback, `localhost` or a hostname (Ray silently replaces a loopback address)"},
	{D5, "a worker reaches the head's registered address only through a gateway, not at all, or cannot open its GCS port; the head has no route to a worker's registered address, where it is known before the plan reads the nodes (a route through a gateway is a warning)"},
	{D6, "Ray versions differ across nodes, or Ray is missing on one"},
	{D7, "Python versions differ across nodes, or Python is missing on one"},
	{D8, "tensor × pipeline (× prefill context × data) parallel size exceeds the alive GPUs Ray registered, or the GPUs still free (the placement groups holding the others are named); on a first plan, the GPUs the cluster will register; the legacy executor's free GPU on the head"},
	{D9, "an NCCL/GLOO/TP/UCX interface in `env` is missing on a node or does not carry its Ray address (the cluster's `env` on every node; the deployment's on the head, and on every node that will host a vLLM worker where the release passes the variable to workers); a node's own `interface` (cluster) is missing there, down, or does not carry its Ray address, or is given again in `env`"},
	{D10, "a cluster-wide `VLLM_HOST_IP` in `env` that cannot match every node's registered IP"},
	{D11, "`vllm serve` would run outside the namespace or container the head's Ray runs in"},
	{D12, "the GCS port is held by a foreign or stale Ray (this provider's own unfinished create is replaced instead, with a warning)"},
	{D13, "two nodes would register the same IP"},
	{D14, "the head's Ray address cannot be predicted (no default route and no `node_ip`)"},
	{D15, "`num_gpus` is above what `nvidia-smi` lists on the node"},
	{D16, "`auth_mode = \"token\"` with Ray older than 2.52 on a node"},
	{D17, "the vLLM port is held on the head by another program"},
	{D18, "`VLLM_USE_RAY_V2_EXECUTOR_BACKEND` that vLLM cannot parse (an error) or that this vLLM no longer reads (a warning; an error with `--fail-on-environ-validation`)"},
	{D19, "vLLM is missing, or another version than the head's, on a node that will host a vLLM worker"},
	{D20, "the model's files (a local path, or a Hugging Face snapshot used with `HF_HUB_OFFLINE=1`) are missing on the head, or missing or of another size on a node that will host a vLLM worker"},
	{D21, "`ray_address` is not a Ray that answers, or not the one whose head is the deployment's head"},
	{D22, "a `spark_model` target's `address` is not an address of that target, or the source node has no route to it (checked on every plan, whether or not anything needs copying)"},
	{D23, "a `spark_model` target's directory is owned or writable by another user, or made in a parent another user can write (without the sticky bit), or reached through another user's link"},
	{D24, "Ray on the head is older than 2.9.3, the oldest release whose message definitions the plan's reader of Ray's tables was checked against (a release newer than the newest checked, 2.60, is a warning)"},
	{D25, "the nodes' ranks are not 0 to N-1, one each, or N does not divide tensor × pipeline parallel size"},
	{D26, "`master_addr` is not bound on rank 0's node, or a headless rank has no route to it (a route off the fabric interface, or through a gateway, is a warning), or rank 0 and a headless node have no route to each other's `node_ip` (vLLM's message queues)"},
	{D27, "a node's `node_ip` is not bound on it, or its `interface` is missing, down, or does not carry `node_ip`"},
	{D28, "vLLM is missing on a node, older than 0.11.1 (no `--nnodes`), or another release than on the other nodes"},
	{D29, "a port vLLM binds at a fixed number (the API `port`, `master_port`) is taken on rank 0's node, by any user"},
	{D30, "`/dev/shm` on a node has less free space than vLLM's message queues take there (rank 0's broadcast ring, about 160 MiB; 24 MiB per queue another node reads)"},
	{D31, "the model, a path, is not a directory on a node"},
	{D32, "the model's weights and the KV cache one request of `max_model_len` needs do not fit in what a node gives vLLM (the KV budget: `VLLM_CPU_KVCACHE_SPACE`, `--kv-cache-memory-bytes`, or `--gpu-memory-utilization` of the node's memory less the weights), or that memory is not free there now, other processes and deployments counted (fits with little room: a warning)"},
	{D33, "the fabric between two nodes, on the addresses they use: a port down (an error); MTUs or link speeds that differ between the two ends, or `NCCL_IB_HCA` leaving out a port's RDMA device (warnings); with `fabric_probe`, a measured throughput below `min_gbps` (an error)"},
	{D34, "`restart` puts vLLM under systemd, but systemd is not the node's init, or the SSH user is not root and its user manager does not linger (`loginctl enable-linger`), so nothing would start vLLM after a reboot"},
}
