provider "spark" {
  ssh = {
    user             = "ops"
    private_key_file = "~/.ssh/id_ed25519"
    known_hosts_file = "~/.ssh/known_hosts"
    host_key_policy  = "strict"
    connect_timeout  = "30s"

    # Every node connection goes through the jump host.
    bastion = {
      host = "jump.lab.example"
      user = "ops"
    }
  }
  max_parallel = 16
}
