# Two DGX Sparks: Ray on the fabric (RoCE) network, where the workers join.
resource "spark_ray_cluster" "lab" {
  head = {
    ssh_host  = "10.1.230.180"   # external: where the provider connects
    node_ip   = "192.168.200.12" # fabric: what Ray registers (node:192.168.200.12)
    interface = "enp1s0f1np1"    # the fabric port: NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME on this node
    num_gpus  = 1
    resources = { "spark.head" = 1 }
  }

  workers = {
    spark2 = {
      ssh_host  = "10.1.230.181"
      node_ip   = "192.168.200.13"
      interface = "enp1s0f0np0" # cabled on the other port of its card
      num_gpus  = 1
    }
  }

  runtime = {
    host = { ray_command = "/opt/ray/bin/ray" }
  }

  gcs_port       = 6379
  dashboard_host = "127.0.0.1"

  timeouts = {
    create = "15m"
  }
}

output "head_address" {
  # What workers joined, and what vLLM's ray_address should be.
  value = spark_ray_cluster.lab.head_address
}
