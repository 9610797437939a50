# The demo: the field report's deployment on the lab. Every node is read
# first; then a Ray cluster and a vLLM server (the lab's stand-in, a test
# double) go up. Pass -var vllm_host_ip=<fabric ip> to make the field
# report's mistake and see the plan refuse it.
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

resource "spark_vllm_deployment" "qwen" {
  head                 = { ssh_host = spark_ray_cluster.lab.head.ssh_host }
  runtime              = spark_ray_cluster.lab.runtime
  ray_address          = spark_ray_cluster.lab.head_address
  model                = "Qwen/Qwen3.5-122B-A10B-FP8"
  served_model_name    = "qwen3.5"
  tensor_parallel_size = length(local.lab.nodes)
  host_ip              = coalesce(var.vllm_host_ip, spark_ray_cluster.lab.head.registered_ip)
  api_key_file         = "/etc/vllm-api-key"
  timeouts             = { create = "5m" }
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
  value = spark_vllm_deployment.qwen.endpoint
}
