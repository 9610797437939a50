package datasources_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"golang.org/x/crypto/ssh"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

func nodeBlock(name string, n lab.Node, extra ...string) string {
	return fmt.Sprintf(`
data "spark_node" %q {
  ssh_host    = %q
  ray_command = %q
  %s
}
`, name, n.SSHHost, n.RayCommand, strings.Join(extra, "\n  "))
}

func fingerprint(t *testing.T, line string) string {
	t.Helper()
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return ssh.FingerprintSHA256(k)
}

// interfacesCarry checks that the interfaces list holds each address (CIDR)
// on a distinct interface.
type interfacesCarry []string

func (c interfacesCarry) CheckValue(v any) error {
	list, ok := v.([]any)
	if !ok {
		return fmt.Errorf("interfaces is %T, want a list", v)
	}
	owner := map[string]string{}
	for _, item := range list {
		iface, _ := item.(map[string]any)
		addrs, _ := iface["addresses"].([]any)
		for _, a := range addrs {
			owner[fmt.Sprint(a)] = fmt.Sprint(iface["name"])
		}
	}
	seen := map[string]string{}
	for _, want := range c {
		name, ok := owner[want]
		if !ok {
			return fmt.Errorf("no interface carries %s (have %v)", want, owner)
		}
		if other, dup := seen[name]; dup {
			return fmt.Errorf("%s and %s are on one interface %s, want separate networks", other, want, name)
		}
		seen[name] = want
	}
	return nil
}

func (c interfacesCarry) String() string { return fmt.Sprintf("interfaces carrying %v", []string(c)) }

func TestAccNodeDataSource_multiHomedFacts(t *testing.T) {
	l := acctest.Lab(t)
	cfg := acctest.ProviderBlock(l, "")
	var checks []statecheck.StateCheck
	for _, n := range l.Nodes {
		cfg += nodeBlock(n.Name, n)
		addr := "data.spark_node." + n.Name
		prefix := func(ip, subnet string) string { return ip + subnet[strings.Index(subnet, "/"):] }
		checks = append(checks,
			// What Ray's head and vLLM auto-detect is the external address, not the fabric one.
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("default_route_ip"), knownvalue.StringExact(n.ExternalIP)),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("interfaces"),
				interfacesCarry{prefix(n.ExternalIP, l.ExternalSubnet), prefix(n.FabricIP, l.FabricSubnet)}),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("ray_version"), knownvalue.StringExact(l.RayVersion)),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("python_version"), knownvalue.StringExact(l.PythonVersion)),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("hostname"), knownvalue.StringExact(n.Name)),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("gpu_count"), knownvalue.Int64Exact(0)),
			// The lab's vLLM stand-in (a test double) answers `vllm --version`.
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("vllm_version"), knownvalue.StringExact(l.VLLMVersion)),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("docker_version"), knownvalue.StringExact(l.DockerVersion)),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("host_key_fingerprint"), knownvalue.StringExact(fingerprint(t, n.HostKey))),
			statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(fmt.Sprintf("%s:%d", n.SSHHost, n.SSHPort))),
		)
		if n.ExternalIP == n.FabricIP {
			t.Fatalf("lab node %s has one address for both networks", n.Name)
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		Steps:                    []resource.TestStep{{Config: cfg, ConfigStateChecks: checks}},
	})
}

func TestAccNodeDataSource_strictRefusesUnknownHost(t *testing.T) {
	l := acctest.Lab(t)
	n := l.Nodes[0]
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{{
			Config: acctest.ProviderBlock(l, empty) + nodeBlock("n", n),
			ExpectError: regexp.MustCompile(`(?s)unknown ssh-ed25519 key\s+` + regexp.QuoteMeta(fingerprint(t, n.HostKey)) +
				`.*accept-new`),
		}},
	})
}

func TestAccNodeDataSource_wrongPinnedKeyRefused(t *testing.T) {
	l := acctest.Lab(t)
	if len(l.Nodes) < 2 {
		t.Fatal("the lab needs two nodes")
	}
	n, other := l.Nodes[0], l.Nodes[1]
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{
			{
				// Pinned to the other node's key: refused although known_hosts trusts the host.
				Config:      acctest.ProviderBlock(l, "") + nodeBlock("n", n, fmt.Sprintf("host_key = %q", other.HostKey)),
				ExpectError: regexp.MustCompile(`does not match the\s+pinned\s+host_key`),
			},
			{
				// Pinned right, with an empty known_hosts: the pin alone is enough.
				Config: acctest.ProviderBlock(l, os.DevNull) + nodeBlock("n", n, fmt.Sprintf("host_key = %q", n.HostKey)),
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("data.spark_node.n",
					tfjsonpath.New("host_key_fingerprint"), knownvalue.StringExact(fingerprint(t, n.HostKey)))},
			},
		},
	})
}

func TestAccNodeDataSource_malformedPinIsAConfigError(t *testing.T) {
	l := acctest.Lab(t)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{{
			Config:      acctest.ProviderBlock(l, "") + nodeBlock("n", l.Nodes[0], `host_key = "AAAA-not-a-key"`),
			ExpectError: regexp.MustCompile(`(?s)Invalid host key.*host_key = "AAAA-not-a-key"`),
		}},
	})
}

// Accept-new records a first-seen key; after the node's host key changes
// (a reinstalled box, or an impostor) the recorded key refuses it.
func TestAccNodeDataSource_acceptNewThenChangedKey(t *testing.T) {
	l := acctest.Lab(t)
	n := l.Nodes[len(l.Nodes)-1]
	dir := t.TempDir()
	known := filepath.Join(dir, "known_hosts") // does not exist yet
	acceptNew := `host_key_policy = "accept-new"`
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{
			{
				Config: acctest.ProviderBlock(l, known, acceptNew) + nodeBlock("n", n),
				Check: func(*terraform.State) error {
					b, err := os.ReadFile(known)
					if err != nil {
						return err
					}
					if !strings.Contains(string(b), strings.Fields(n.HostKey)[1]) {
						return fmt.Errorf("accept-new did not record %s's key in %s:\n%s", n.Name, known, b)
					}
					return nil
				},
			},
			{
				PreConfig: func() {
					if _, err := lab.RegenerateHostKey(context.Background(), acctest.LabDir(), n.Name); err != nil {
						t.Fatal(err)
					}
				},
				Config:      acctest.ProviderBlock(l, known, acceptNew) + nodeBlock("n", n),
				ExpectError: regexp.MustCompile(`host key has CHANGED`),
			},
			{
				// A fresh known_hosts accepts the new key, so the test ends clean.
				Config: acctest.ProviderBlock(l, filepath.Join(dir, "known_hosts.new"), acceptNew) + nodeBlock("n", n),
			},
		},
	})
}
