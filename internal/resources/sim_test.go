package resources_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/lab-infra/terraform-provider-spark/internal/sim"
)

// The tests named TestSim* drive the resources through the provider's
// protocol 6 server, as Terraform does (internal/sim's Terraform), against
// simulated nodes (internal/sim's Fleet): SSH servers that answer the
// provider's commands from a model of the nodes. No lab, no Docker: they
// run with the unit tests, and assert the plans' values and diagnostics.

// simLab is a few simulated nodes, all on one SSH port (as real nodes'
// sshd on 22), and the provider configuration that reaches them.
type simLab struct {
	t        *testing.T
	fleet    *sim.Fleet
	model    *sim.Model
	eps      []sim.Endpoint
	provider map[string]any
	cluster  sim.State // the spark_ray_cluster a test keeps, when it needs its state
}

func newSimLab(t *testing.T, nodes int) *simLab {
	t.Helper()
	key, err := sim.NewClientKey()
	if err != nil {
		t.Fatal(err)
	}
	f, err := sim.Start(sim.Options{Nodes: nodes, ClientKey: key.Authorized, OnePort: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := sim.WriteKnownHosts(kh, f.Endpoints()); err != nil {
		t.Fatal(err)
	}
	eps := f.Endpoints()
	return &simLab{t: t, fleet: f, model: f.Model, eps: eps, provider: sim.ProviderConfigOnPort(key, kh, eps[0].Port)}
}

// host is node i's ssh_host.
func (l *simLab) host(i int) string { return l.eps[i].Host }

// fabricIP is node i's fabric address, which Ray detects there.
func fabricIP(i int) string { return fmt.Sprintf("10.20.0.%d", i+1) }

// terraform is a fresh provider, as Terraform starts one for every walk;
// it is closed when the test ends.
func (l *simLab) terraform() *sim.Terraform {
	l.t.Helper()
	tf, err := sim.NewTerraform(context.Background(), l.provider)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(tf.Close)
	return tf
}

// plan is `terraform plan` of cfg: from st, or from nothing when st is
// the zero State.
func (l *simLab) plan(typ string, cfg map[string]any, st sim.State) (sim.Plan, error) {
	l.t.Helper()
	if st.Value.Type() == nil {
		return l.terraform().PlanNew(context.Background(), typ, cfg)
	}
	return l.terraform().Plan(context.Background(), typ, cfg, st)
}

// mustPlan is plan, which must succeed.
func (l *simLab) mustPlan(typ string, cfg map[string]any, st sim.State) sim.Plan {
	l.t.Helper()
	p, err := l.plan(typ, cfg, st)
	if err != nil {
		l.t.Fatalf("plan: %v", err)
	}
	return p
}

// apply is the apply walk of p, with a provider of its own.
func (l *simLab) apply(p sim.Plan) (sim.State, error) {
	l.t.Helper()
	return l.terraform().Apply(context.Background(), p)
}

// converge is `terraform apply` of cfg from st: a plan walk and an apply
// walk, which must both succeed. It returns the plan and the new state.
func (l *simLab) converge(typ string, cfg map[string]any, st sim.State) (sim.Plan, sim.State) {
	l.t.Helper()
	p := l.mustPlan(typ, cfg, st)
	next, err := l.apply(p)
	if err != nil {
		l.t.Fatalf("apply: %v", err)
	}
	return p, next
}

// simCluster is a spark_ray_cluster on the simulated nodes: the builder of
// its configuration in these tests (as rayCluster is on the lab). The head
// is on node 0; every other attribute is left to its default unless a
// field sets it.
type simCluster struct {
	headIP  string                    // head.node_ip; "" leaves it to Ray's detection
	head    map[string]any            // more attributes of the head
	workers map[string]int            // worker name -> the node it is on
	worker  map[string]map[string]any // more attributes of a worker, by name
	extra   map[string]any            // more attributes of the cluster
}

const clusterType = "spark_ray_cluster"

func (c simCluster) config(l *simLab) map[string]any {
	head := map[string]any{"ssh_host": l.host(0)}
	if c.headIP != "" {
		head["node_ip"] = c.headIP
	}
	for k, v := range c.head {
		head[k] = v
	}
	cfg := map[string]any{"head": head}
	if len(c.workers) > 0 {
		workers := map[string]any{}
		for name, node := range c.workers {
			w := map[string]any{"ssh_host": l.host(node)}
			for k, v := range c.worker[name] {
				w[k] = v
			}
			workers[name] = w
		}
		cfg["workers"] = workers
	}
	for k, v := range c.extra {
		cfg[k] = v
	}
	return cfg
}

// show is the value at steps in v, as a test compares it: a string's
// text, a bool's or number's, "<null>" or "<unknown>". A step is an
// attribute of an object or a key of a map.
func show(t *testing.T, v tftypes.Value, steps ...string) string {
	t.Helper()
	for _, s := range steps {
		if v.IsNull() || !v.IsKnown() {
			break
		}
		var m map[string]tftypes.Value
		if err := v.As(&m); err != nil {
			t.Fatalf("%s in %v: %v", s, steps, err)
		}
		next, ok := m[s]
		if !ok {
			return "<absent>"
		}
		v = next
	}
	switch {
	case !v.IsKnown():
		return "<unknown>"
	case v.IsNull():
		return "<null>"
	case v.Type().Is(tftypes.String):
		var s string
		_ = v.As(&s)
		return s
	case v.Type().Is(tftypes.Bool):
		var b bool
		_ = v.As(&b)
		return fmt.Sprint(b)
	case v.Type().Is(tftypes.Number):
		var f big.Float
		_ = v.As(&f)
		if f.IsInt() {
			return f.Text('f', 0) // 3145781, not 3.145781e+06
		}
		return f.Text('g', -1)
	case v.Type().Is(tftypes.Map{}):
		var m map[string]tftypes.Value
		_ = v.As(&m)
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			kv = append(kv, k+"="+show(t, m[k]))
		}
		return "{" + strings.Join(kv, ", ") + "}"
	}
	return v.String()
}

// expectValues checks the values at the paths of want ("a.b.c": steps
// a, b, c) in v.
func expectValues(t *testing.T, what string, v tftypes.Value, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if got := show(t, v, strings.Split(p, ".")...); got != w {
			t.Errorf("%s %s = %q, want %q", what, p, got, w)
		}
	}
}

// diagnostic is what a test expects of one diagnostic: its summary, the
// rule its detail cites ("" none), the attribute it is on (nil: the
// resource), and text its detail holds.
type diagnostic struct {
	severity tfprotov6.DiagnosticSeverity
	summary  string
	rule     string
	attr     *tftypes.AttributePath
	detail   []string
}

// attr is the path of steps: names of attributes, "[key]" a map key.
func attr(steps ...string) *tftypes.AttributePath {
	p := tftypes.NewAttributePath()
	for _, s := range steps {
		if k, ok := strings.CutPrefix(s, "["); ok {
			p = p.WithElementKeyString(strings.TrimSuffix(k, "]"))
			continue
		}
		p = p.WithAttributeName(s)
	}
	return p
}

// expectDiagnostic finds the diagnostic with want's summary and severity
// whose detail holds want's texts (else the first with that summary) among
// ds, and checks it; it returns it.
func expectDiagnostic(t *testing.T, ds []*tfprotov6.Diagnostic, want diagnostic) *tfprotov6.Diagnostic {
	t.Helper()
	if want.severity == tfprotov6.DiagnosticSeverityInvalid {
		want.severity = tfprotov6.DiagnosticSeverityError
	}
	var d *tfprotov6.Diagnostic
	for _, c := range ds {
		if c.Summary != want.summary || c.Severity != want.severity {
			continue
		}
		if d == nil || holdsAll(c.Detail, want.detail) && !holdsAll(d.Detail, want.detail) {
			d = c
		}
	}
	if d == nil {
		t.Errorf("no %v %q among:\n%s", want.severity, want.summary, listDiagnostics(ds))
		return nil
	}
	if want.rule != "" && !strings.Contains(d.Detail, "\n\nRule "+want.rule+" (") {
		t.Errorf("%q does not cite rule %s:\n%s", d.Summary, want.rule, d.Detail)
	}
	switch {
	case want.attr == nil && d.Attribute != nil && len(d.Attribute.Steps()) > 0:
		t.Errorf("%q is on %s, want the resource", d.Summary, d.Attribute)
	case want.attr != nil && (d.Attribute == nil || !d.Attribute.Equal(want.attr)):
		t.Errorf("%q is on %v, want %s", d.Summary, d.Attribute, want.attr)
	}
	for _, s := range want.detail {
		if !strings.Contains(d.Detail, s) {
			t.Errorf("%q: the detail lacks %q:\n%s", d.Summary, s, d.Detail)
		}
	}
	return d
}

func holdsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func listDiagnostics(ds []*tfprotov6.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "  %v %q on %v: %s\n", d.Severity, d.Summary, d.Attribute, firstLineOf(d.Detail))
	}
	return b.String()
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// stepDiagnostics are the diagnostics of the step err failed, which must
// be a step the provider failed.
func stepDiagnostics(t *testing.T, err error) []*tfprotov6.Diagnostic {
	t.Helper()
	var se *sim.StepError
	if !errors.As(err, &se) {
		t.Fatalf("want the provider to fail a step, got %v", err)
	}
	return se.Diagnostics
}

// noDiagnostics fails the test on any diagnostic in ds.
func noDiagnostics(t *testing.T, what string, ds []*tfprotov6.Diagnostic) {
	t.Helper()
	if len(ds) > 0 {
		t.Errorf("%s: diagnostics on a healthy cluster:\n%s", what, listDiagnostics(ds))
	}
}

// warning and failure name the severities a test expects.
const (
	warning = tfprotov6.DiagnosticSeverityWarning
	failure = tfprotov6.DiagnosticSeverityError
)
