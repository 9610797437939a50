package datasources_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
)

// nodeData is one spark_node data source on a lab node.
type nodeData struct {
	name  string // the data source's name; default "n"
	node  lab.Node
	extra []string // more attribute lines
}

func (d nodeData) config() string {
	if d.name == "" {
		d.name = "n"
	}
	return fmt.Sprintf(`
data "spark_node" %q {
  ssh_host    = %q
  ray_command = %q
  %s
}
`, d.name, d.node.SSHHost, d.node.RayCommand, strings.Join(d.extra, "\n  "))
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
	cfg := acctest.Provider{}.Config(l)
	var checks []statecheck.StateCheck
	for _, n := range l.Nodes {
		cfg += nodeData{name: n.Name, node: n}.config()
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
		factsFromFilesAgree(t, l, n)
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
			Config: acctest.Provider{KnownHosts: empty}.Config(l) + nodeData{node: n}.config(),
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
				Config:      acctest.Provider{}.Config(l) + nodeData{node: n, extra: []string{fmt.Sprintf("host_key = %q", other.HostKey)}}.config(),
				ExpectError: regexp.MustCompile(`does not match the\s+pinned\s+host_key`),
			},
			{
				// Pinned right, with an empty known_hosts: the pin alone is enough.
				Config: acctest.Provider{KnownHosts: os.DevNull}.Config(l) + nodeData{node: n, extra: []string{fmt.Sprintf("host_key = %q", n.HostKey)}}.config(),
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
			Config:      acctest.Provider{}.Config(l) + nodeData{node: l.Nodes[0], extra: []string{`host_key = "AAAA-not-a-key"`}}.config(),
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
	acceptNew := []string{`host_key_policy = "accept-new"`}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		Steps: []resource.TestStep{
			{
				Config: acctest.Provider{KnownHosts: known, SSH: acceptNew}.Config(l) + nodeData{node: n}.config(),
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
				Config:      acctest.Provider{KnownHosts: known, SSH: acceptNew}.Config(l) + nodeData{node: n}.config(),
				ExpectError: regexp.MustCompile(`host key has CHANGED`),
			},
			{
				// A fresh known_hosts accepts the new key, so the test ends clean.
				Config: acctest.Provider{KnownHosts: filepath.Join(dir, "known_hosts.new"), SSH: acceptNew}.Config(l) + nodeData{node: n}.config(),
			},
		},
	})
}

// factsFromFilesAgree reads the facts Python knows on n both ways, from
// the files (no Python started) and with Python, for each of the lab's
// environments (vLLM 0.32.0 and 0.11.0, each a virtual environment), with
// a TCP probe of a port that answers and one that does not: they agree,
// and the files answered.
func factsFromFilesAgree(t *testing.T, l *lab.File, n lab.Node) {
	t.Helper()
	read := func(rayCmd, vllmCmd, probe string, how ...string) nodefacts.Facts {
		args := append([]string{rayCmd, "", "", "", probe, vllmCmd}, how...)
		f, err := nodefacts.Parse(acctest.OnNodeAs(t, n, l.SSHUser, "read the node facts", nodefacts.Script, args...) + "\n")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, env := range []struct{ ray, vllm string }{{n.RayCommand, n.VLLMCommand}, {l.SecondVLLM.RayCommand, l.SecondVLLM.VLLMCommand}} {
		for _, probe := range []string{n.FabricIP + ":22", n.FabricIP + ":1"} {
			files, python := read(env.ray, env.vllm, probe), read(env.ray, env.vllm, probe, "python")
			got := []string{files.PythonVersion, files.RayVersion, files.VLLMVersion, files.VLLMExecutorSource, files.TCP}
			want := []string{python.PythonVersion, python.RayVersion, python.VLLMVersion, python.VLLMExecutorSource, python.TCP}
			if !slices.Equal(got, want) {
				t.Errorf("%s, %s: from the files %q, with Python %q", n.Name, env.ray, got, want)
			}
			if !files.ReadFromFiles || python.ReadFromFiles {
				t.Errorf("%s, %s: read from the files: %v, and when Python is asked: %v", n.Name, env.ray, files.ReadFromFiles, python.ReadFromFiles)
			}
		}
	}
}
