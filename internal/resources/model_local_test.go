package resources_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/lab-infra/terraform-provider-spark/internal/sim"
	"github.com/lab-infra/terraform-provider-spark/internal/transport/sshtest"
)

// localModel is spark_model with both its nodes on this machine, behind an
// in-process SSH server (sshtest, a test double for sshd that runs
// commands with the local /bin/sh): the real scripts run with this
// machine's python3 and copy over 127.0.0.1, driven through the provider's
// protocol as Terraform drives it (internal/sim's Terraform). No lab.
type localModel struct {
	t        *testing.T
	provider map[string]any
	node     map[string]any // ssh_host (the provider's ssh.port is the server's)
	src, dst string
}

func newLocalModel(t *testing.T) *localModel {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is not on PATH")
		}
		t.Skip("python3 is not on PATH")
	}
	key := sshtest.NewKey(t)
	srv := sshtest.New(t, key.Signer.PublicKey())
	dir := t.TempDir()
	knownHosts := filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.Addr())}, srv.HostKey().PublicKey()) + "\n"
	if err := os.WriteFile(knownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &localModel{t: t, src: filepath.Join(dir, "src"), dst: filepath.Join(dir, "dst"),
		provider: map[string]any{"ssh": map[string]any{"user": "test", "private_key": string(key.PEM),
			"known_hosts_file": knownHosts, "use_agent": false, "port": srv.Port()}},
		node: map[string]any{"ssh_host": srv.Host()}}
	for name, size := range map[string]int{"model.safetensors": 3<<20 + 1, "config.json": 40, "tokenizer/vocab.txt": 12} {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		m.write(filepath.Join(m.src, name), b)
	}
	return m
}

func (m *localModel) write(p string, b []byte) {
	m.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		m.t.Fatal(err)
	}
}

func (m *localModel) config() map[string]any {
	source := map[string]any{"path": m.src}
	target := map[string]any{"address": "127.0.0.1", "path": m.dst}
	for k, v := range m.node {
		source[k], target[k] = v, v
	}
	return map[string]any{"source": source, "targets": map[string]any{"spark2": target}}
}

func (m *localModel) terraform() *sim.Terraform {
	m.t.Helper()
	tf, err := sim.NewTerraform(context.Background(), m.provider)
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(tf.Close)
	return tf
}

const modelType = "spark_model"

// A model's life through the provider's protocol: the create's plan (the
// manifest unknown until the source is hashed at apply), the copy, a
// no-change plan, a file deleted on the target (drift: a warning on the
// target naming the file, planned as repaired) and its repair, an import
// (the manifest read back from the source), and the destroy (the copies
// gone, the source untouched).
func TestLocalModel_lifecycle(t *testing.T) {
	m := newLocalModel(t)
	ctx := context.Background()
	p, err := m.terraform().PlanNew(ctx, modelType, m.config())
	if err != nil {
		t.Fatal(err)
	}
	expectValues(t, "the create's plan", p.Planned, map[string]string{"id": "127.0.0.1:" + m.src, "files": "<unknown>",
		"total_bytes": "<unknown>", "targets.spark2.path": m.dst, "targets.spark2.copied": "<unknown>"})
	st, err := m.terraform().Apply(ctx, p)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	expectValues(t, "the created state", st.Value, map[string]string{"total_bytes": "3145781",
		"targets.spark2.missing": "tftypes.List[tftypes.String]<>"})
	if got := show(t, st.Value, "files", "config.json", "size"); got != "40" {
		t.Errorf("files[config.json].size = %s", got)
	}
	if got := show(t, st.Value, "targets", "spark2", "copied"); !strings.Contains(got, "model.safetensors") || !strings.Contains(got, "tokenizer/vocab.txt") {
		t.Errorf("copied = %s", got)
	}
	same := func(name string) bool {
		a, errA := os.ReadFile(filepath.Join(m.src, name))
		b, errB := os.ReadFile(filepath.Join(m.dst, name))
		return errA == nil && errB == nil && string(a) == string(b)
	}
	if !same("model.safetensors") || !same("tokenizer/vocab.txt") {
		t.Fatal("the target's files differ from the source's")
	}

	p, err = m.terraform().Plan(ctx, modelType, m.config(), st)
	if err != nil || p.Changes() != "" {
		t.Fatalf("a plan of the copied model: %v\n%s", err, p.Changes())
	}

	if err := os.Remove(filepath.Join(m.dst, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	p, err = m.terraform().Plan(ctx, modelType, m.config(), st)
	if err != nil {
		t.Fatal(err)
	}
	expectDiagnostic(t, p.Diagnostics, diagnostic{severity: warning, summary: "Model files missing on spark2",
		attr: attr("targets", "[spark2]"), detail: []string{"lacks 1 file(s) of the model in " + m.dst, "model.safetensors"}})
	expectValues(t, "the refreshed state", p.Refreshed, map[string]string{
		"targets.spark2.missing": `tftypes.List[tftypes.String]<tftypes.String<"model.safetensors">>`})
	expectValues(t, "the repair's plan", p.Planned, map[string]string{"targets.spark2.missing": "tftypes.List[tftypes.String]<>"})
	if st, err = m.terraform().Apply(ctx, p); err != nil {
		t.Fatalf("the repair: %v", err)
	}
	if !same("model.safetensors") {
		t.Error("the repair did not copy the file again")
	}

	imported, err := m.terraform().Import(ctx, modelType, "127.0.0.1:"+m.src)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	expectValues(t, "the imported state", imported.Value, map[string]string{"total_bytes": "3145781", "source.path": m.src})
	if got, want := show(t, imported.Value, "files", "config.json", "sha256"), show(t, st.Value, "files", "config.json", "sha256"); got != want {
		t.Errorf("the imported manifest's hash of config.json is %s, the created %s", got, want)
	}

	if err := m.terraform().Destroy(ctx, modelType, m.config(), st); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(m.dst, "*")); len(left) != 0 {
		t.Errorf("the destroy left %v", left)
	}
	if _, err := os.Stat(filepath.Join(m.src, "model.safetensors")); err != nil {
		t.Errorf("the destroy touched the source: %v", err)
	}
}

// Bad input is refused at plan, before anything is copied: a source
// directory that is missing, and both a path and a repository.
func TestLocalModel_planRefusals(t *testing.T) {
	m := newLocalModel(t)
	ctx := context.Background()
	cfg := m.config()
	cfg["source"].(map[string]any)["path"] = filepath.Join(m.src, "nope")
	_, err := m.terraform().PlanNew(ctx, modelType, cfg)
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "The model's source directory is missing or empty",
		attr: attr("source", "path"), detail: []string{"holds no files"}})

	cfg = m.config()
	cfg["source"].(map[string]any)["repository"] = "org/model"
	_, err = m.terraform().PlanNew(ctx, modelType, cfg)
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "Invalid Attribute Combination", attr: attr("source", "path")})
	if _, err := os.Stat(m.dst); !os.IsNotExist(err) {
		t.Errorf("a refused plan made the target's directory (%v)", err)
	}
}

// D22 on every plan: a target address this machine does not hold (in
// TEST-NET-2; this machine's own are on TEST-NET-1) is refused on the create's plan, naming the target, the
// address and the addresses it has, with nothing made on the target; and
// after a copy, when nothing needs copying, the same address is still
// refused (the state would record an address the next repair fails on).
func TestLocalModel_targetAddressRefusedEveryPlan(t *testing.T) {
	const notHere = "198.51.100.13"
	if held, err := net.InterfaceAddrs(); err != nil || strings.Contains(fmt.Sprint(held), notHere+"/") {
		t.Fatalf("this machine holds %s (%v): the test needs an address it does not", notHere, held)
	}
	m := newLocalModel(t)
	ctx := context.Background()
	elsewhere := func() map[string]any {
		cfg := m.config()
		cfg["targets"].(map[string]any)["spark2"].(map[string]any)["address"] = notHere
		return cfg
	}
	want := diagnostic{summary: "The model's target address is not an address of the target", rule: "D22",
		attr: attr("targets", "[spark2]", "address"), detail: []string{`targets["spark2"].address = "` + notHere + `"`, "holds no such address; its addresses:"}}
	_, err := m.terraform().PlanNew(ctx, modelType, elsewhere())
	expectDiagnostic(t, stepDiagnostics(t, err), want)
	if _, err := os.Stat(m.dst); !os.IsNotExist(err) {
		t.Errorf("a refused plan made the target's directory (%v)", err)
	}

	p, err := m.terraform().PlanNew(ctx, modelType, m.config())
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.terraform().Apply(ctx, p)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	_, err = m.terraform().Plan(ctx, modelType, elsewhere(), st)
	expectDiagnostic(t, stepDiagnostics(t, err), want)
}

// D23 at plan: a target directory others can write (the issue's
// /tmp/shared-models/m, mode 777) is refused naming it, before anything is
// copied there.
func TestLocalModel_targetDirectoryOthersCanWriteRefused(t *testing.T) {
	m := newLocalModel(t)
	if err := os.MkdirAll(m.dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(m.dst, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := m.terraform().PlanNew(context.Background(), modelType, m.config())
	expectDiagnostic(t, stepDiagnostics(t, err), diagnostic{summary: "The model's target directory is not this SSH user's alone", rule: "D23",
		attr: attr("targets", "[spark2]", "path"), detail: []string{m.dst + " is writable by other users (mode 777)", "chmod go-w"}})
	if entries, _ := os.ReadDir(m.dst); len(entries) != 0 {
		t.Errorf("a refused plan wrote %v", entries)
	}
}
