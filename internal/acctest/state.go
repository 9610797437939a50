package acctest

import (
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// SecretInState names the first attribute of the state that holds secret
// (an API key, a token, a canary given to a write-only attribute): a
// secret must reach the nodes and never the state, which anyone who can
// read the backend reads.
func SecretInState(s *terraform.State, secret string) error {
	for addr, r := range s.RootModule().Resources {
		for k, v := range r.Primary.Attributes {
			if strings.Contains(v, secret) {
				return fmt.Errorf("the secret is in the state: %s.%s", addr, k)
			}
		}
	}
	return nil
}
