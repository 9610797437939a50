variable "vllm_api_key" {
  type      = string
  sensitive = true
}

resource "spark_vllm_deployment" "qwen" {
  head                   = { ssh_host = spark_ray_cluster.lab.head.ssh_host }
  runtime                = spark_ray_cluster.lab.runtime
  ray_address            = spark_ray_cluster.lab.head_address
  model                  = "Qwen/Qwen3.5-122B-A10B-FP8"
  served_model_name      = "qwen3.5"
  tensor_parallel_size   = 2
  pipeline_parallel_size = 1
  # Must be the address Ray registered for the head: the plan checks it.
  host_ip            = spark_ray_cluster.lab.head.registered_ip
  port               = 8000
  api_key_wo         = var.vllm_api_key # write-only: never in state (Terraform/OpenTofu >= 1.11)
  api_key_wo_version = 1                # bump to rotate
  env                = { NCCL_SOCKET_IFNAME = "enp1s0f1np1" }
  extra_args         = ["--max-model-len", "32768"]
  timeouts           = { create = "60m" }
}

output "openai_base_url" {
  value = spark_vllm_deployment.qwen.endpoint
}
