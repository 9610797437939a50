# Terraform 1.5+ / OpenTofu 1.5+: adopt a running server in the plan, then
# `terraform apply`. <head ssh_host>:<port>.
import {
  to = spark_vllm_deployment.qwen
  id = "10.1.230.180:8000"
}
