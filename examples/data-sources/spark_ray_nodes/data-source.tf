# Which address did Ray register for each node? vLLM's VLLM_HOST_IP must be
# the head's registered_ip, or its placement group can never be placed.
data "spark_ray_nodes" "lab" {
  ssh_host = "10.1.230.180"
}

output "node_labels" {
  value = {
    for n in data.spark_ray_nodes.lab.nodes :
    n.hostname => "node:${n.registered_ip}${n.is_head ? " (head)" : ""}, ${lookup(n.resources, "GPU", 0)} GPU"
    if n.alive
  }
}
