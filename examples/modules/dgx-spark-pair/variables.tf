variable "nodes" {
  description = <<-EOT
    The two nodes, head first. `ssh_host` is where the provider connects (the
    management network); `fabric_ip` is the node's address on the fabric (RoCE)
    network, which Ray registers and where the workers join.
  EOT
  type = list(object({
    name      = string
    ssh_host  = string
    fabric_ip = string
    num_gpus  = optional(number, 1)
    # This node's fabric port, where the two are cabled on different ports
    # (executor = "mp"); null: fabric_interface.
    fabric_interface = optional(string)
  }))
  validation {
    condition     = length(var.nodes) == 2
    error_message = "nodes: a pair is two nodes, head first; got ${length(var.nodes)}. For more, use spark_ray_cluster directly."
  }
  validation {
    condition     = length(distinct([for n in var.nodes : n.fabric_ip])) == length(var.nodes)
    error_message = "nodes: every fabric_ip must differ (Ray would register two nodes under one address)."
  }
}

variable "executor" {
  description = <<-EOT
    How vLLM spans the pair: "ray" (a Ray cluster on both nodes, vLLM on the
    head) or "mp" (vLLM's own multi-node mode, no Ray: rank 0 on the first
    node serves, the second runs headless; for images that ship without Ray).
  EOT
  type        = string
  default     = "ray"
  validation {
    condition     = contains(["ray", "mp"], var.executor)
    error_message = "executor: \"ray\" or \"mp\", got \"${var.executor}\"."
  }
}

variable "fabric_interface" {
  description = "The fabric interface on every node (for example `enp1s0f1np1`): NCCL and Gloo are told to use it. Null leaves them to their own choice."
  type        = string
  default     = null
}

variable "ray_command" {
  description = "Path of `ray` on every node (executor = \"ray\")."
  type        = string
  default     = "ray"
}

variable "vllm_command" {
  description = "Path of `vllm` on the head (on every node with executor = \"mp\")."
  type        = string
  default     = "vllm"
}

variable "model" {
  description = "What `vllm serve` loads: a Hugging Face id or a path on the nodes."
  type        = string
}

variable "served_model_name" {
  description = "The name clients ask for. Null: the model."
  type        = string
  default     = null
}

variable "tensor_parallel_size" {
  description = "Tensor parallel size: 2 spreads every layer over both nodes."
  type        = number
  default     = 2
}

variable "pipeline_parallel_size" {
  description = "Pipeline parallel size."
  type        = number
  default     = 1
}

variable "api_key_file" {
  description = "Path, on the head, of a 0600 file holding the API key vLLM requires. The key never enters Terraform."
  type        = string
}

variable "vllm_host_ip" {
  description = <<-EOT
    VLLM_HOST_IP. Null: the head's fabric address. Set it only when the head has
    several fabric addresses; it must be the one Ray registers for the head.
  EOT
  type        = string
  default     = null
}

variable "port" {
  description = "The port vLLM serves on."
  type        = number
  default     = 8000
}

variable "env" {
  description = "Extra environment for `vllm serve` (for example `HF_HUB_OFFLINE`)."
  type        = map(string)
  default     = {}
}

variable "extra_args" {
  description = "Extra `vllm serve` arguments (for example `[\"--max-model-len\", \"8192\"]`)."
  type        = list(string)
  default     = []
}

variable "vllm_timeout" {
  description = "How long `vllm serve` may take to load and answer its first completion."
  type        = string
  default     = "30m"
}
