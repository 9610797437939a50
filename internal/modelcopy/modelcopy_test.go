package modelcopy

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lab-infra/terraform-provider-spark/internal/modelfiles"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
	"github.com/lab-infra/terraform-provider-spark/internal/transport/sshtest"
)

// Two nodes that are this machine behind an in-process SSH server (a test
// double for sshd: it runs commands with the local /bin/sh), a source and
// a target directory: the copy runs its real scripts, over 127.0.0.1.
func fixture(t *testing.T) (*Manager, Node, Node) {
	t.Helper()
	return fixtureWith(t, transport.Config{})
}

// fixtureWith is fixture with a pool made from cfg (its user and key are
// the fixture's).
func fixtureWith(t *testing.T, cfg transport.Config) (*Manager, Node, Node) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is not on PATH")
		}
		t.Skip("python3 is not on PATH")
	}
	key := sshtest.NewKey(t)
	srv := sshtest.New(t, key.Signer.PublicKey())
	cfg.User, cfg.PrivateKey, cfg.KnownHostsFile = "test", key.PEM, os.DevNull
	pool, err := transport.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := transport.Endpoint{Host: srv.Host(), Port: srv.Port(), HostKey: string(ssh.MarshalAuthorizedKey(srv.HostKey().PublicKey()))}
	dir := t.TempDir()
	src := Node{Name: "source", Endpoint: e, Path: filepath.Join(dir, "src")}
	dst := Node{Name: "spark2", Endpoint: e, Path: filepath.Join(dir, "dst", "model"), Address: "127.0.0.1"}
	files := map[string]int{"model.safetensors": 5<<20 + 3, "config.json": 20, "tokenizer/vocab.txt": 11}
	for name, size := range files {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		p := filepath.Join(src.Path, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &Manager{Pool: pool}, src, dst
}

func TestPlaceDriftRemove(t *testing.T) {
	m, src, dst := fixture(t)
	ctx := context.Background()
	man, missing, err := m.Read(ctx, src, true)
	if err != nil || missing || len(man) != 3 {
		t.Fatalf("the source's manifest: %v %v %v", man, missing, err)
	}
	copied, err := m.Place(ctx, src, man, []Node{dst})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(copied["spark2"], ","); got != "config.json,model.safetensors,tokenizer/vocab.txt" {
		t.Errorf("copied %q", got)
	}
	if got, _, err := m.Read(ctx, dst, true); err != nil || !sameFiles(got, man) {
		t.Fatalf("the target holds %v (%v), want %v", got, err, man)
	}

	// Placed again: nothing to copy.
	if copied, err = m.Place(ctx, src, man, []Node{dst}); err != nil || len(copied["spark2"]) != 0 {
		t.Errorf("a second place copied %v (%v)", copied, err)
	}

	// A file removed and one truncated on the target: drift names both,
	// and placing again copies those two only.
	if err := os.Remove(filepath.Join(dst.Path, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst.Path, "config.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	drift, err := m.Drift(ctx, man, []Node{dst}, false)
	if err != nil || !slices.Equal(drift["spark2"], []string{"config.json", "model.safetensors"}) {
		t.Fatalf("drift %v (%v)", drift, err)
	}
	if copied, err = m.Place(ctx, src, man, []Node{dst}); err != nil || !slices.Equal(copied["spark2"], drift["spark2"]) {
		t.Errorf("the repair copied %v (%v)", copied, err)
	}

	// A file changed in place, at its size: only a hashing refresh sees it.
	b, _ := os.ReadFile(filepath.Join(dst.Path, "tokenizer", "vocab.txt"))
	b[0] ^= 0xff
	if err := os.WriteFile(filepath.Join(dst.Path, "tokenizer", "vocab.txt"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if d, _ := m.Drift(ctx, man, []Node{dst}, false); len(d["spark2"]) != 0 {
		t.Errorf("a listing by size saw a same-size change: %v", d)
	}
	if d, _ := m.Drift(ctx, man, []Node{dst}, true); !slices.Equal(d["spark2"], []string{"tokenizer/vocab.txt"}) {
		t.Errorf("a hashing refresh: %v", d)
	}
	if copied, err = m.Place(ctx, src, man, []Node{dst}); err != nil || !slices.Equal(copied["spark2"], []string{"tokenizer/vocab.txt"}) {
		t.Errorf("the repair of a same-size change copied %v (%v)", copied, err)
	}

	// A file the target held before, not the model's: kept by Remove.
	if err := os.WriteFile(filepath.Join(dst.Path, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(ctx, dst, []string{"config.json", "model.safetensors", "tokenizer/vocab.txt"}); err != nil {
		t.Fatal(err)
	}
	left, _, _ := m.Read(ctx, dst, false)
	if len(left) != 1 || left["notes.txt"].Size != 4 {
		t.Errorf("after Remove the target holds %v, want notes.txt only", left)
	}
	if _, err := os.Stat(filepath.Join(dst.Path, "tokenizer")); !os.IsNotExist(err) {
		t.Errorf("the emptied tokenizer/ is still there (%v)", err)
	}
	if again, _, _ := m.Read(ctx, src, true); !sameFiles(again, man) {
		t.Error("the source changed")
	}
}

// A source file that changed since the manifest was read is not copied as
// if it were the manifest's: the error names the target and the file.
func TestPlaceRefusesAChangedSource(t *testing.T) {
	m, src, dst := fixture(t)
	ctx := context.Background()
	man, _, err := m.Read(ctx, src, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src.Path, "config.json"), []byte("grown since the manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = m.Place(ctx, src, man, []Node{dst})
	if err == nil || !strings.Contains(err.Error(), "spark2") || !strings.Contains(err.Error(), "config.json on the source is 24 bytes, the manifest has 20") {
		t.Fatalf("err = %v", err)
	}
}

func sameFiles(a, b modelfiles.Manifest) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// max_parallel = 1: a copy's two ends run in one slot taken for both (each
// taking its own, the receiver held the only slot while the sender waited
// for it, and every copy failed after the receiver's wait).
func TestPlaceWithOneSlot(t *testing.T) {
	m, src, dst := fixtureWith(t, transport.Config{MaxParallel: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	man, _, err := m.Read(ctx, src, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Place(ctx, src, man, []Node{dst}); err != nil {
		t.Fatalf("a copy with max_parallel = 1: %v", err)
	}
	if got, _, _ := m.Read(ctx, dst, true); !sameFiles(got, man) {
		t.Fatal("the target differs from the source")
	}
}

// A name in state that could leave the directory is never removed: the
// removal refuses it, naming it, and removes nothing.
func TestRemoveRefusesANameOutsideTheDirectory(t *testing.T) {
	m, _, dst := fixture(t)
	ctx := context.Background()
	outside := filepath.Join(filepath.Dir(dst.Path), "x")
	if err := os.MkdirAll(dst.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, []byte("not the model's"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := m.Remove(ctx, dst, []string{"config.json", "../x"})
	if err == nil || !strings.Contains(err.Error(), `"../x"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("a file outside the model was removed: %v", err)
	}
}
