package raycluster_test

import (
	"context"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/sim"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// simHead is a cluster manager and a running head on simulated nodes
// (internal/sim, a test double: SSH servers answering from a model, whose
// GCS serves the gRPC calls internal/raygcs makes).
func simHead(t *testing.T) (*raycluster.Manager, *sim.Fleet, raycluster.Spec, string) {
	t.Helper()
	key, err := sim.NewClientKey()
	if err != nil {
		t.Fatal(err)
	}
	f, err := sim.Start(sim.Options{Nodes: 2, ClientKey: key.Authorized})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := sim.WriteKnownHosts(kh, f.Endpoints()); err != nil {
		t.Fatal(err)
	}
	pool, err := transport.NewPool(transport.Config{User: "ops", PrivateKey: key.PEM, KnownHostsFile: kh, Policy: transport.PolicyStrict})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := f.Model.StartRay(0, "--head", "--port", "6379"); err != nil {
		t.Fatal(err)
	}
	if err := f.Model.StartRay(1, "--address", "10.20.0.1:6379"); err != nil {
		t.Fatal(err)
	}
	f.Model.SetToken(0, "the-token")
	ep := f.Endpoints()[0]
	s := raycluster.Spec{Head: raycluster.NodeSpec{Name: "head", Endpoint: transport.Endpoint{Host: ep.Host, Port: ep.Port}}, GCSPort: 6379}
	f.ResetCommands()
	return raycluster.NewManager(pool), f, s, "10.20.0.1:6379"
}

func count(f *sim.Fleet, route string) int64 { return f.Stats().Commands[route].Count }

// A table read asks the GCS over gRPC, and reads the head's token once per
// process: a registration wait polls the GCS alone. A token another apply
// replaced is read again, once, and the read still succeeds.
func TestTableReadsTheTokenOnce(t *testing.T) {
	m, f, s, gcs := simHead(t)
	ctx := context.Background()
	var first ray.Table
	for i := range 3 {
		tab, err := m.Table(ctx, s, gcs)
		if err != nil {
			t.Fatal(err)
		}
		if !tab.GCSUp || len(tab.Nodes) != 2 || tab.RayVersion != sim.RayVersion {
			t.Fatalf("read %d: %+v", i, tab)
		}
		if i == 0 {
			first = tab
		}
	}
	if n := count(f, "read Ray node table"); n != 0 {
		t.Errorf("the node table was read with Python %d times; the GCS answers over gRPC", n)
	}
	if n := count(f, "read Ray auth token"); n != 1 {
		t.Errorf("three reads read the token %d times, want once", n)
	}
	f.Model.SetToken(0, "another-token")
	tab, err := m.Table(ctx, s, gcs)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(first, tab); d != "" {
		t.Errorf("the read after the token changed differs:\n%s", d)
	}
	if n := count(f, "read Ray auth token"); n != 2 {
		t.Errorf("a replaced token was read %d times in all, want 2", n)
	}
	if n := count(f, "read Ray node table"); n != 0 {
		t.Errorf("a replaced token sent the read to Python (%d times)", n)
	}
}

// A GCS whose messages the decoder cannot read (another Ray release's
// layout) is read with Python, and the table is the same.
func TestTableFallsBackToPythonOnAnotherLayout(t *testing.T) {
	m, f, s, gcs := simHead(t)
	ctx := context.Background()
	viaGRPC, err := m.TableOverGRPC(ctx, s, gcs)
	if err != nil {
		t.Fatal(err)
	}
	f.Model.OtherGCSLayout()
	got, err := m.Table(ctx, s, gcs)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(f, "read Ray node table"); n != 1 {
		t.Errorf("the table was read with Python %d times, want once", n)
	}
	if d := cmp.Diff(viaGRPC, got); d != "" {
		t.Errorf("the Python read differs from the gRPC one:\n%s", d)
	}
}

// A head that does not answer SSH fails the read once: the Python
// fallback would ask the same head, and a plan would wait twice.
func TestTableOfAHeadThatDoesNotAnswerTriesOnce(t *testing.T) {
	m, _, s, gcs := simHead(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close() // no SSH server here: the handshake fails
		}
	}()
	s.Head.Endpoint = transport.Endpoint{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := m.Table(ctx, s, gcs); err == nil {
		t.Fatal("a head that closes every connection was read")
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("the head was connected to %d times, want once", n)
	}
}
