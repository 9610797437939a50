package transport

import (
	"encoding/pem"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lab-infra/terraform-provider-spark/internal/transport/sshtest"
)

func TestWithDefaultsFillsUnsetFields(t *testing.T) {
	cfg, err := withDefaults(Config{User: "ops", KnownHostsFile: "/kh", KeepaliveTimeout: -time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != DefaultPort || cfg.ConnectTimeout != DefaultConnectTimeout ||
		cfg.KeepaliveInterval != DefaultKeepaliveInterval || cfg.KeepaliveTimeout != DefaultKeepaliveTimeout ||
		cfg.MaxParallel != DefaultMaxParallel || cfg.Policy != PolicyStrict {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
	if cfg.User != "ops" || cfg.KnownHostsFile != "/kh" {
		t.Fatalf("given values overwritten: %+v", cfg)
	}
	given := Config{User: "ops", Port: 2222, ConnectTimeout: time.Second, KeepaliveInterval: 2 * time.Second,
		KeepaliveTimeout: 3 * time.Second, MaxParallel: 4, Policy: PolicyAcceptNew, KnownHostsFile: "/kh"}
	if cfg, err := withDefaults(given); err != nil || !reflect.DeepEqual(cfg, given) {
		t.Fatalf("withDefaults(%+v) = %+v, %v; want it unchanged", given, cfg, err)
	}
}

func TestWithDefaultsPolicy(t *testing.T) {
	if _, err := withDefaults(Config{User: "ops", Policy: "trusting"}); err == nil || !strings.Contains(err.Error(), "host_key_policy") {
		t.Fatalf("unknown policy: got %v", err)
	}
	cfg, err := withDefaults(Config{User: "ops", Policy: PolicyInsecure})
	if err != nil || cfg.KnownHostsFile != "" {
		t.Fatalf("insecure policy: known_hosts %q, %v; want none", cfg.KnownHostsFile, err)
	}
}

func TestParseKey(t *testing.T) {
	if s, err := parseKey("private_key", nil); s != nil || err != nil {
		t.Fatalf("empty key = %v %v, want nothing", s, err)
	}
	if s, err := parseKey("private_key", sshtest.NewKey(t).PEM); s == nil || err != nil {
		t.Fatalf("valid key = %v %v", s, err)
	}
	if _, err := parseKey("private_key_file /k", []byte("not a key")); err == nil || !strings.Contains(err.Error(), "parse private_key_file /k") {
		t.Fatalf("garbage key: got %v", err)
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(sshtest.NewKey(t).Private, "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseKey("private_key", pem.EncodeToMemory(block)); err == nil || !strings.Contains(err.Error(), "ssh-agent") {
		t.Fatalf("passphrase-protected key: want the way out through ssh-agent, got %v", err)
	}
}

func TestCheckCredentials(t *testing.T) {
	key := []ssh.Signer{sshtest.NewKey(t).Signer}
	for _, c := range []struct {
		name string
		cfg  Config
		keys []ssh.Signer
		ok   bool
	}{
		{"key", Config{}, key, true},
		{"agent", Config{UseAgent: true, AgentSocket: "/agent"}, nil, true},
		{"agent and key", Config{UseAgent: true, AgentSocket: "/agent"}, key, true},
		{"nothing", Config{}, nil, false},
		{"agent without socket", Config{UseAgent: true}, key, false},
	} {
		if err := checkCredentials(c.cfg, c.keys); (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
