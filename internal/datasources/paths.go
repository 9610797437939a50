package datasources

import "github.com/hashicorp/terraform-plugin-framework/path"

var pathSSHHost = path.Root("ssh_host")
