# The module on a real pair of nodes (the lab: `make lab-up`), run by
# `make test-module` on Terraform and on OpenTofu. The node addresses, the SSH
# access and the model come from a var file that scripts/module-test.sh writes
# from the lab file.

variables {
  tensor_parallel_size = 2
  # vLLM's CPU build serving the lab's tiny model in a small budget.
  env          = { VLLM_CPU_KVCACHE_SPACE = "1", HF_HUB_OFFLINE = "1" }
  extra_args   = ["--dtype", "float32", "--max-model-len", "256", "--enforce-eager"]
  vllm_timeout = "10m"
}

# Plan only: every address is known at plan, and it is the fabric.
run "plan_places_everything_on_the_fabric" {
  command = plan

  assert {
    condition     = spark_ray_cluster.this[0].head.registered_ip == var.nodes[0].fabric_ip
    error_message = "The head would register ${spark_ray_cluster.this[0].head.registered_ip}, not its fabric address ${var.nodes[0].fabric_ip}."
  }
  assert {
    condition     = output.registered_ips[var.nodes[1].name] == var.nodes[1].fabric_ip
    error_message = "The worker would register ${output.registered_ips[var.nodes[1].name]}, not its fabric address ${var.nodes[1].fabric_ip}."
  }
  assert {
    condition     = output.placement.placement_ip == var.nodes[0].fabric_ip
    error_message = "vLLM would place by ${output.placement.placement_ip}, not the head's fabric address."
  }
  assert {
    condition     = output.head_address == "${var.nodes[0].fabric_ip}:6379"
    error_message = "The worker would join ${output.head_address}."
  }
}

# The field report's mistake: VLLM_HOST_IP on the management network while Ray
# registers the fabric. Refused at plan, before anything starts.
run "field_report_mistake_is_refused" {
  command = plan

  variables {
    vllm_host_ip = var.nodes[0].ssh_host
  }

  expect_failures = [spark_vllm_deployment.this]
}

# vLLM's own multi-node mode, no Ray (plan only; the provider's acceptance
# test and `make reality` serve with it): rank 0 on the first node, its
# fabric address the master address, nothing of Ray planned.
run "mp_plans_the_pair_without_ray" {
  command = plan

  variables {
    executor = "mp"
  }

  assert {
    condition     = length(spark_ray_cluster.this) == 0 && length(spark_vllm_deployment.this) == 0
    error_message = "executor = \"mp\" plans Ray."
  }
  assert {
    condition     = spark_vllm_mp_deployment.this[0].master_addr == var.nodes[0].fabric_ip
    error_message = "The master address would be ${spark_vllm_mp_deployment.this[0].master_addr}, not rank 0's fabric address."
  }
  assert {
    condition     = spark_vllm_mp_deployment.this[0].nodes[var.nodes[1].name].rank == 1 && output.endpoint == "http://${var.nodes[0].ssh_host}:8000/v1"
    error_message = "The second node is not rank 1, or the endpoint is ${output.endpoint}."
  }
}

# Apply: Ray on both nodes, vLLM with tensor parallel 2 across them. The
# provider returns only after the server answered a completion (its
# readiness check), so "serving" here means a completion was served.
run "serves_across_the_pair" {
  assert {
    condition     = spark_vllm_deployment.this[0].status == "serving"
    error_message = "vLLM is ${spark_vllm_deployment.this[0].status}."
  }
  assert {
    condition     = output.endpoint == "http://${var.nodes[0].ssh_host}:8000/v1"
    error_message = "endpoint is ${output.endpoint}."
  }
  assert {
    condition     = length(spark_ray_cluster.this[0].workers) == 1 && output.registered_ips[var.nodes[1].name] == var.nodes[1].fabric_ip
    error_message = "The worker registered ${output.registered_ips[var.nodes[1].name]}."
  }
}
