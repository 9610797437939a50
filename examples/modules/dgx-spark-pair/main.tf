# Two nodes (for example two DGX Sparks) on their fabric: Ray registers each node
# by its fabric address, the worker joins the head there, and vLLM serves on the
# head with the same address as VLLM_HOST_IP, the field report's fix. With
# executor = "mp", vLLM's own multi-node mode instead, with no Ray.

locals {
  head   = var.nodes[0]
  worker = var.nodes[1]
  fabric_env = var.fabric_interface == null ? {} : {
    NCCL_SOCKET_IFNAME = var.fabric_interface
    GLOO_SOCKET_IFNAME = var.fabric_interface
  }
  vllm_host_ip = coalesce(var.vllm_host_ip, local.head.fabric_ip)
}

resource "spark_ray_cluster" "this" {
  count = var.executor == "ray" ? 1 : 0
  head = {
    ssh_host = local.head.ssh_host
    node_ip  = local.head.fabric_ip
    num_gpus = local.head.num_gpus
  }
  workers = {
    (local.worker.name) = {
      ssh_host = local.worker.ssh_host
      node_ip  = local.worker.fabric_ip
      num_gpus = local.worker.num_gpus
    }
  }
  runtime = { host = { ray_command = var.ray_command } }
  env     = local.fabric_env
  # Ray's dashboard stays on the head's loopback: reach it through SSH.
  dashboard_host = "127.0.0.1"
}

resource "spark_vllm_deployment" "this" {
  count                  = var.executor == "ray" ? 1 : 0
  head                   = { ssh_host = spark_ray_cluster.this[0].head.ssh_host }
  runtime                = spark_ray_cluster.this[0].runtime
  ray_address            = spark_ray_cluster.this[0].head_address
  model                  = var.model
  served_model_name      = var.served_model_name
  tensor_parallel_size   = var.tensor_parallel_size
  pipeline_parallel_size = var.pipeline_parallel_size
  vllm_command           = var.vllm_command
  host_ip                = local.vllm_host_ip
  port                   = var.port
  api_key_file           = var.api_key_file
  env                    = merge(var.env, local.fabric_env)
  extra_args             = var.extra_args
  timeouts               = { create = var.vllm_timeout, update = var.vllm_timeout }

  lifecycle {
    # The module's rule, stricter than the provider's: the provider refuses this
    # only where the vLLM on the head pins its placement to VLLM_HOST_IP (every
    # release before 0.21, or VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0); the module
    # refuses it always, so vLLM's own traffic never leaves the fabric and a
    # later executor change cannot break a running pair.
    precondition {
      condition     = local.vllm_host_ip == spark_ray_cluster.this[0].head.registered_ip
      error_message = "vllm_host_ip = \"${local.vllm_host_ip}\" is not the address Ray registers for the head (${spark_ray_cluster.this[0].head.registered_ip}): vLLM would place its workers by a node Ray does not have (the field report). Leave vllm_host_ip null, or set it to the head's fabric_ip."
    }
  }
}

# executor = "mp": vLLM's own multi-node mode, no Ray. Rank 0 (the first
# node) serves; the second runs headless. Each node's fabric address is its
# VLLM_HOST_IP and its own fabric port its GLOO/NCCL interface.
resource "spark_vllm_mp_deployment" "this" {
  count = var.executor == "mp" ? 1 : 0
  nodes = { for i, n in var.nodes : n.name => {
    ssh_host  = n.ssh_host
    rank      = i
    node_ip   = n.fabric_ip
    interface = n.fabric_interface != null ? n.fabric_interface : var.fabric_interface
  } }
  model                  = var.model
  served_model_name      = var.served_model_name
  tensor_parallel_size   = var.tensor_parallel_size
  pipeline_parallel_size = var.pipeline_parallel_size
  vllm_command           = var.vllm_command
  port                   = var.port
  api_key_file           = var.api_key_file
  env                    = var.env
  extra_args             = var.extra_args
  timeouts               = { create = var.vllm_timeout, update = var.vllm_timeout }
}
