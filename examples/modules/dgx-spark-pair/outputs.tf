output "head_address" {
  description = "`<head registered ip>:<gcs port>`: where the worker joined, and what a further vLLM deployment's ray_address is."
  value       = spark_ray_cluster.this.head_address
}

output "registered_ips" {
  description = "Per node name, the address Ray registers (its `node:<ip>` resource)."
  value = merge(
    { (local.head.name) = spark_ray_cluster.this.head.registered_ip },
    { for name, w in spark_ray_cluster.this.workers : name => w.registered_ip },
  )
}

output "endpoint" {
  description = "OpenAI base URL of the served model."
  value       = spark_vllm_deployment.this.endpoint
}

output "served_model_name" {
  description = "The name clients ask for."
  value       = spark_vllm_deployment.this.served_model_name
}

output "placement" {
  description = "What the plan concluded about the vLLM on the head: its release, its Ray executor, and whether it pins its placement group to placement_ip."
  value = {
    vllm_version     = spark_vllm_deployment.this.vllm_version
    executor         = spark_vllm_deployment.this.executor
    placement_pinned = spark_vllm_deployment.this.placement_pinned
    placement_ip     = spark_vllm_deployment.this.placement_ip
  }
}
