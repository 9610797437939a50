# Terraform 1.5+ / OpenTofu 1.5+: adopt weights already copied by hand, then
# `terraform apply` (only what a target lacks is copied).
import {
  to = spark_model.qwen
  id = "10.1.230.180:/models/Qwen2.5-7B-Instruct"
}
