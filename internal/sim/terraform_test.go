package sim

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The whole path on a few nodes, in this process: the provider creates a
// cluster on the simulated nodes, and a later plan of the same
// configuration changes nothing, with one handshake per node.
func TestCreateThenNoChangePlan(t *testing.T) {
	key, err := NewClientKey()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Start(Options{Nodes: 3, ClientKey: key.Authorized})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kh := filepath.Join(t.TempDir(), "known_hosts")
	b, err := KnownHosts(f.Endpoints())
	if err != nil || os.WriteFile(kh, b, 0o600) != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := ClusterConfig(f.Endpoints())
	st := create(ctx, t, ProviderConfig(key, kh), cfg)
	tf, err := NewTerraform(ctx, ProviderConfig(key, kh))
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	p, err := tf.Plan(ctx, ClusterType, cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Changes(); c != "" {
		t.Errorf("a plan of the running cluster changes:\n%s", c)
	}
	if w := tf.Warnings(); len(w) > 0 {
		t.Errorf("warnings on a healthy cluster: %q", w)
	}
	if h := tf.Pool().Handshakes(); h != 3 {
		t.Errorf("the plan made %d handshakes, want 3", h)
	}
	s := f.Stats()
	t.Logf("commands the nodes answered: %v", s.Commands)
	if s.UnknownCount > 0 {
		t.Errorf("commands the simulated nodes do not know: %q", s.Unknown)
	}
}

func create(ctx context.Context, t *testing.T, providerCfg, cfg map[string]any) State {
	t.Helper()
	tf, err := NewTerraform(ctx, providerCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	st, err := tf.ApplyCreate(ctx, ClusterType, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
