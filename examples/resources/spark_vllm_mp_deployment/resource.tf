# Two DGX Sparks serving one model with vLLM's own multi-node mode: no Ray
# on either box. Rank 0 serves the API; rank 1 runs --headless. Each node
# names its own fabric port (Sparks cabled on different ports name them
# differently).
resource "spark_vllm_mp_deployment" "qwen" {
  nodes = {
    spark1 = { ssh_host = "10.1.230.180", rank = 0, node_ip = "192.168.200.12", interface = "enp1s0f0np0" }
    spark2 = { ssh_host = "10.1.230.181", rank = 1, node_ip = "192.168.200.13", interface = "enp1s0f1np1" }
  }
  model                = "/models/Qwen3.5-122B-A10B-FP8" # the same path on both boxes (spark_model copies it)
  served_model_name    = "qwen3.5"
  tensor_parallel_size = 2
  # master_addr defaults to rank 0's node_ip; master_port to 29501, vLLM's.
  port       = 8000
  extra_args = ["--max-model-len", "32768"]
  timeouts   = { create = "60m" }
}

output "openai_base_url" {
  value = spark_vllm_mp_deployment.qwen.endpoint
}
