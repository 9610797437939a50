package acctest

import (
	"fmt"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

// Provider is the spark provider block for the lab: its SSH user, key and
// known_hosts file.
type Provider struct {
	KnownHosts string   // ssh.known_hosts_file; "" is the lab's
	SSH        []string // more attribute lines inside ssh, e.g. `host_key_policy = "accept-new"`
}

// Config renders the provider block for the lab f.
func (p Provider) Config(f *lab.File) string {
	knownHosts := p.KnownHosts
	if knownHosts == "" {
		knownHosts = f.KnownHostsFile
	}
	return fmt.Sprintf(`
provider "spark" {
  ssh = {
    user             = %q
    private_key_file = %q
    known_hosts_file = %q
    connect_timeout  = "10s"
    %s
  }
}
`, f.SSHUser, f.PrivateKeyFile, knownHosts, strings.Join(p.SSH, "\n    "))
}
