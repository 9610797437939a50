# The demo: read every lab node and show the address Ray and vLLM would
# auto-detect beside the fabric address the operator meant to use. On a
# multi-homed box they differ, which is the field report's trap.
terraform {
  required_providers {
    spark = {
      source = "lab-infra/spark"
    }
  }
}

variable "lab_file" {
  description = "Path of the lab file written by `make lab-up`."
  type        = string
  default     = "../../.lab/lab.json"
}

locals {
  lab   = jsondecode(file(var.lab_file))
  nodes = { for n in local.lab.nodes : n.name => n }
}

provider "spark" {
  ssh = {
    user             = local.lab.ssh_user
    private_key_file = local.lab.private_key_file
    known_hosts_file = local.lab.known_hosts_file
  }
}

data "spark_node" "this" {
  for_each    = local.nodes
  ssh_host    = each.value.ssh_host
  ray_command = each.value.ray_command
}

output "nodes" {
  description = "Per node: what Ray/vLLM auto-detect versus the fabric address."
  value = {
    for name, n in data.spark_node.this : name => {
      auto_detected_ip = n.default_route_ip
      fabric_ip        = local.nodes[name].fabric_ip
      trap             = n.default_route_ip != local.nodes[name].fabric_ip
      ray_version      = n.ray_version
      interfaces       = { for i in n.interfaces : i.name => i.addresses if i.name != "lo" }
    }
  }
}
