package sim

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ClusterType is the resource the bench plans.
const ClusterType = "spark_ray_cluster"

// ClientKey is the key the provider signs in with: PEM for the provider's
// private_key, the authorized_keys line for the nodes.
type ClientKey struct {
	PEM        []byte
	Authorized string
}

// NewClientKey makes a fresh ed25519 client key.
func NewClientKey() (ClientKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return ClientKey{}, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return ClientKey{}, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return ClientKey{}, err
	}
	return ClientKey{PEM: pem.EncodeToMemory(block),
		Authorized: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))}, nil
}

// KnownHosts is a known_hosts file that lists every node's host key, as
// an operator's would: the provider checks them strictly.
func KnownHosts(eps []Endpoint) ([]byte, error) {
	var b strings.Builder
	for _, e := range eps {
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(e.HostKey))
		if err != nil {
			return nil, fmt.Errorf("host key of %s: %w", e, err)
		}
		b.WriteString(knownhosts.Line([]string{e.String()}, k) + "\n")
	}
	return []byte(b.String()), nil
}

// WriteKnownHosts writes KnownHosts(eps) to path (0600).
func WriteKnownHosts(path string, eps []Endpoint) error {
	lines, err := KnownHosts(eps)
	if err != nil {
		return err
	}
	return os.WriteFile(path, lines, 0o600)
}

// ProviderConfig is the provider block: the SSH user and key, known_hosts,
// strict host key checking; max_parallel left to its default.
func ProviderConfig(key ClientKey, knownHostsFile string) map[string]any {
	return map[string]any{"ssh": sshConfig(key, knownHostsFile)}
}

func sshConfig(key ClientKey, knownHostsFile string) map[string]any {
	return map[string]any{"user": "sim", "private_key": string(key.PEM), "known_hosts_file": knownHostsFile,
		"host_key_policy": "strict", "use_agent": false}
}

// ProviderConfigOnPort is ProviderConfig with ssh.port set: for nodes that
// all listen on that port (Options.OnePort), whose node objects then need
// no ssh_port.
func ProviderConfigOnPort(key ClientKey, knownHostsFile string, port int) map[string]any {
	ssh := sshConfig(key, knownHostsFile)
	ssh["port"] = port
	return map[string]any{"ssh": ssh}
}

// ClusterConfig is a spark_ray_cluster on eps: the first the head, the
// others workers w001, w002, …; every other attribute left to its default
// (Ray detects addresses and GPUs, token authentication, the host runtime).
func ClusterConfig(eps []Endpoint) map[string]any {
	node := func(e Endpoint) map[string]any { return map[string]any{"ssh_host": e.Host, "ssh_port": e.Port} }
	cfg := map[string]any{"head": node(eps[0])}
	if len(eps) > 1 {
		workers := map[string]any{}
		for i, e := range eps[1:] {
			workers[WorkerName(i+1)] = node(e)
		}
		cfg["workers"] = workers
	}
	return cfg
}

// WorkerName is the name of the worker on node i (1 onwards).
func WorkerName(i int) string { return fmt.Sprintf("w%03d", i) }
