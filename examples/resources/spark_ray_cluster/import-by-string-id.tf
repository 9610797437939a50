# Terraform 1.5+ / OpenTofu 1.5+: adopt a running cluster in the plan, then
# `terraform apply`. The head's ssh_host, then each worker as <name>=<ssh_host>.
import {
  to = spark_ray_cluster.lab
  id = "10.1.230.180,spark2=10.1.230.181"
}
