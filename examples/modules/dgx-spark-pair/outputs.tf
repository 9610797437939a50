output "head_address" {
  description = "`<head registered ip>:<gcs port>`: where the worker joined, and what a further vLLM deployment's ray_address is (null with executor = \"mp\")."
  value       = one(spark_ray_cluster.this[*].head_address)
}

output "registered_ips" {
  description = "Per node name, the address Ray registers (its `node:<ip>` resource); with executor = \"mp\", the address each node's ranks announce (VLLM_HOST_IP)."
  value = var.executor == "mp" ? { for n in var.nodes : n.name => n.fabric_ip } : merge(
    { (local.head.name) = spark_ray_cluster.this[0].head.registered_ip },
    { for name, w in spark_ray_cluster.this[0].workers : name => w.registered_ip },
  )
}

output "endpoint" {
  description = "OpenAI base URL of the served model."
  value       = one(concat(spark_vllm_deployment.this[*].endpoint, spark_vllm_mp_deployment.this[*].endpoint))
}

output "served_model_name" {
  description = "The name clients ask for."
  value       = one(concat(spark_vllm_deployment.this[*].served_model_name, spark_vllm_mp_deployment.this[*].served_model_name))
}

output "placement" {
  description = "What the plan concluded about the vLLM on the head: its release, its executor (with executor = \"mp\": \"mp\", pinning nothing), and whether it pins its placement group to placement_ip."
  value = var.executor == "mp" ? {
    vllm_version     = spark_vllm_mp_deployment.this[0].vllm_version
    executor         = "mp"
    placement_pinned = false
    placement_ip     = spark_vllm_mp_deployment.this[0].master_addr
    } : {
    vllm_version     = spark_vllm_deployment.this[0].vllm_version
    executor         = spark_vllm_deployment.this[0].executor
    placement_pinned = spark_vllm_deployment.this[0].placement_pinned
    placement_ip     = spark_vllm_deployment.this[0].placement_ip
  }
}
