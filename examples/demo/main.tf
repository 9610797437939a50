# The demo: the field report's deployment on the lab. Every node is read
# first; then a Ray cluster and real vLLM (its CPU build, serving the lab's
# tiny model) go up. Pass -var vllm_host_ip=<fabric ip> to make the field
# report's mistake: with the legacy executor (legacy_executor = true, how
# every vLLM before 0.21 places) the plan refuses it; with vLLM 0.32's
# default executor it warns and serves.
terraform {
  required_providers {
    spark = {
      source = "lab-infra/spark"
    }
  }
}

variable "lab_file" {
  description = "Path of the lab file written by `make lab-up`."
  type        = string
  default     = "../../.lab/lab.json"
}

variable "vllm_host_ip" {
  description = "VLLM_HOST_IP. Null: the address Ray registered for the head (the fix)."
  type        = string
  default     = null
}

variable "legacy_executor" {
  description = "Run vLLM's legacy Ray executor (VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0), which pins its placement group to node:<VLLM_HOST_IP>."
  type        = bool
  default     = true
}

locals {
  lab     = jsondecode(file(var.lab_file))
  nodes   = { for n in local.lab.nodes : n.name => n }
  head    = local.lab.nodes[0]
  workers = { for n in slice(local.lab.nodes, 1, length(local.lab.nodes)) : n.name => n }
}

provider "spark" {
  ssh = {
    user             = local.lab.ssh_user
    private_key_file = local.lab.private_key_file
    known_hosts_file = local.lab.known_hosts_file
  }
}

data "spark_node" "this" {
  for_each    = local.nodes
  ssh_host    = each.value.ssh_host
  ray_command = each.value.ray_command
}

# As in the field report: no node_ip, so Ray registers what it detects.
resource "spark_ray_cluster" "lab" {
  head = {
    ssh_host = local.head.ssh_host
    num_gpus = 1
  }
  workers = {
    for name, n in local.workers : name => { ssh_host = n.ssh_host, num_gpus = 1 }
  }
  runtime = { host = { ray_command = local.head.ray_command } }
}

# Real vLLM on CPU: the lab's tiny model, eager mode, a 1 GiB KV cache.
resource "spark_vllm_deployment" "tiny" {
  head                 = { ssh_host = spark_ray_cluster.lab.head.ssh_host }
  runtime              = spark_ray_cluster.lab.runtime
  ray_address          = spark_ray_cluster.lab.head_address
  model                = local.head.model_path
  served_model_name    = "tiny"
  vllm_command         = local.head.vllm_command
  tensor_parallel_size = 1
  host_ip              = coalesce(var.vllm_host_ip, spark_ray_cluster.lab.head.registered_ip)
  api_key_file         = "/etc/vllm-api-key"
  env = merge({ VLLM_CPU_KVCACHE_SPACE = "1", HF_HUB_OFFLINE = "1" },
  var.legacy_executor ? { VLLM_USE_RAY_V2_EXECUTOR_BACKEND = "0" } : {})
  extra_args = ["--dtype", "float32", "--max-model-len", "256", "--enforce-eager"]
  timeouts   = { create = "10m", update = "10m" }
}

output "nodes" {
  description = "Per node: what Ray/vLLM auto-detect versus the fabric address."
  value = {
    for name, n in data.spark_node.this : name => {
      auto_detected_ip = n.default_route_ip
      fabric_ip        = local.nodes[name].fabric_ip
      trap             = n.default_route_ip != local.nodes[name].fabric_ip
    }
  }
}

output "head_registered_ip" {
  value = spark_ray_cluster.lab.head.registered_ip
}

output "endpoint" {
  value = spark_vllm_deployment.tiny.endpoint
}

output "placement" {
  description = "What the plan concluded about the vLLM on the head."
  value = {
    vllm_version     = spark_vllm_deployment.tiny.vllm_version
    executor         = spark_vllm_deployment.tiny.executor
    placement_pinned = spark_vllm_deployment.tiny.placement_pinned
    placement_ip     = spark_vllm_deployment.tiny.placement_ip
  }
}
