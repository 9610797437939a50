# What a multi-homed DGX Spark looks like to Ray and vLLM.
data "spark_node" "spark1" {
  ssh_host    = "10.1.230.180"
  ray_command = "/opt/ray/bin/ray"
}

output "ray_will_detect" {
  # Ray's head and vLLM's get_ip() pick this address when none is given.
  value = data.spark_node.spark1.default_route_ip
}

output "fabric_addresses" {
  value = [
    for i in data.spark_node.spark1.interfaces : i.addresses
    if i.name == "enp1s0f1np1"
  ]
}
