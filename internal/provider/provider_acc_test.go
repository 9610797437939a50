package provider_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
)

// A provider setting that is only known after apply is a clear error at
// plan, naming the attribute, not a crash.
func TestAccProvider_unknownConfigAtPlan(t *testing.T) {
	l := acctest.Lab(t)
	n := l.Nodes[0]
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
resource "terraform_data" "user" {
  input = %q
}

provider "spark" {
  ssh = {
    user             = terraform_data.user.output
    private_key_file = %q
    known_hosts_file = %q
  }
}

data "spark_node" "n" {
  ssh_host = %q
}
`, l.SSHUser, l.PrivateKeyFile, l.KnownHostsFile, n.SSHHost),
			ExpectError: regexp.MustCompile(`(?s)ssh\.user depends on a value that is only known\s+after\s+apply`),
		}},
	})
}

// host_key_policy = "insecure" connects, and warns.
func TestAccProvider_insecurePolicyStillReads(t *testing.T) {
	l := acctest.Lab(t)
	n := l.Nodes[0]
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{{
			Config: acctest.Provider{KnownHosts: "/nonexistent/known_hosts", SSH: []string{`host_key_policy = "insecure"`}}.Config(l) + fmt.Sprintf(`
data "spark_node" "n" {
  ssh_host = %q
}
`, n.SSHHost),
			Check: resource.TestCheckResourceAttr("data.spark_node.n", "default_route_ip", n.ExternalIP),
		}},
	})
}
