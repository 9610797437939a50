package raycluster

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// The parts of Create, Reconcile and Destroy that need no node: how their
// failures are reported, and what they decide from the specs.

func twoWorkers() Spec {
	worker := func(name, host string) NodeSpec {
		return NodeSpec{Name: name, Path: finding.Attr("workers").Key(name), Endpoint: transport.Endpoint{Host: host}}
	}
	return Spec{GCSPort: 6379, Head: NodeSpec{Name: HeadName, Path: finding.Attr("head"), Endpoint: transport.Endpoint{Host: "spark1"}},
		Workers: map[string]NodeSpec{"b": worker("b", "spark3"), "a": worker("a", "spark2")}}
}

func TestGCSAddr(t *testing.T) {
	if got := (Spec{GCSPort: 6380}).GCSAddr("fd00::1"); got != "[fd00::1]:6380" {
		t.Errorf("GCSAddr = %q", got)
	}
}

func TestEndpointsHeadsFirstWorkersByName(t *testing.T) {
	old := twoWorkers()
	old.Head.Endpoint.Host = "spark0"
	var hosts []string
	for _, e := range endpoints(twoWorkers(), old) {
		hosts = append(hosts, e.Host)
	}
	if want := []string{"spark1", "spark2", "spark3", "spark0", "spark2", "spark3"}; !slices.Equal(hosts, want) {
		t.Errorf("endpoints = %v, want %v", hosts, want)
	}
}

func TestWorkerFailuresInNameOrderOnTheWorker(t *testing.T) {
	got := workerFailures(twoWorkers(), "Cannot start Ray worker", map[string]error{"b": errors.New("refused"), "a": errors.New("timeout")})
	if len(got) != 2 || got[0].Detail != "timeout" || got[1].Detail != "refused" {
		t.Fatalf("got %+v", got)
	}
	for _, d := range got {
		if d.Warning || d.Summary != "Cannot start Ray worker" || len(d.Path) != 2 || d.Path[0].Name != "workers" {
			t.Errorf("%+v", d)
		}
	}
	if got[0].Path.String() != `workers["a"]` {
		t.Errorf("the first failure is on %v, want workers[a]", got[0].Path)
	}
	if workerFailures(twoWorkers(), "x", nil) != nil {
		t.Error("no error, yet failures")
	}
}

func TestNotRegistered(t *testing.T) {
	s := twoWorkers()
	for _, c := range []struct {
		name string
		err  error
		attr finding.Path
	}{
		{"a worker", &RegistrationError{Node: "b", Want: "10.0.0.3"}, finding.Attr("workers").Key("b")},
		{"the head", &RegistrationError{Node: HeadName, Want: "10.0.0.1"}, nil},
		{"no table", errors.New("the head's GCS does not answer"), nil},
	} {
		d := notRegistered(s, c.err)
		if d.Warning || d.Summary != "Ray workers did not register as planned" || d.Detail != c.err.Error() || d.Path.String() != c.attr.String() {
			t.Errorf("%s: %+v, want on %v", c.name, d, c.attr)
		}
	}
}

func TestHasError(t *testing.T) {
	w := warning(nil, "w", "d")
	if hasError(nil) || hasError([]finding.Finding{w}) || !hasError([]finding.Finding{w, failed(nil, "e", errors.New("x"))}) {
		t.Error("hasError")
	}
}

func TestUpdateRemoved(t *testing.T) {
	old := twoWorkers()
	old.Workers["c"] = NodeSpec{Name: "c"}
	neu := twoWorkers()
	delete(neu.Workers, "a")
	if got := (Update{Old: old, New: neu}).removed(); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("removed = %v", got)
	}
}

func TestRemovedStillAlive(t *testing.T) {
	old, neu := twoWorkers(), twoWorkers()
	delete(neu.Workers, "b")
	u := Update{Old: old, New: neu, Stop: map[string]StopWorker{"a": {RegisteredIP: "10.0.0.2"}, "b": {RegisteredIP: "10.0.0.3"}}}
	table := func(alive ...string) ray.Table {
		t := ray.Table{GCSUp: true}
		for _, ip := range alive {
			t.Nodes = append(t.Nodes, ray.Node{ID: "n-" + ip, Alive: true, IP: ip})
		}
		return t
	}
	if d := removedStillAlive(table("10.0.0.2"), u, []string{"a", "b"}); d != nil {
		t.Errorf("a restarted worker alive again is fine, yet %+v", d)
	}
	d := removedStillAlive(table("10.0.0.2", "10.0.0.3"), u, []string{"a", "b"})
	if d == nil || d.Warning || d.Summary != "Removed worker is still in the cluster" || d.Path.String() != finding.Attr("workers").Key("b").String() ||
		d.Detail != "Ray on b was stopped but node n-10.0.0.3 (10.0.0.3) is still alive in the node table." {
		t.Errorf("a removed worker still alive: %+v", d)
	}
	if d := removedStillAlive(table("10.0.0.3"), u, []string{"a"}); d != nil {
		t.Errorf("a worker not stopped (unreachable) is not checked, yet %+v", d)
	}
}

func TestUnreachableWorker(t *testing.T) {
	d := unreachableWorker(twoWorkers().Workers["a"], errors.New("dial tcp spark2:22: i/o timeout"))
	if !d.Warning || d.Summary != "Worker unreachable: Ray on it was not stopped" || d.Path.String() != finding.Attr("workers").Key("a").String() ||
		!strings.HasPrefix(d.Detail, "dial tcp spark2:22: i/o timeout.\n\nWorker a is removed from state anyway.") {
		t.Errorf("%+v", d)
	}
}

// Steps with nothing to do touch no node: no pool is needed.
func TestApplyStepsWithNothingToDo(t *testing.T) {
	ctx := context.Background()
	m := &Manager{}
	if tok, err := m.clusterToken(ctx, twoWorkers()); tok != "" || err != nil {
		t.Errorf("no token authentication: %q %v", tok, err)
	}
	s := twoWorkers()
	if d := m.removeToken(ctx, s, s.Head); d != nil {
		t.Errorf("no token authentication, yet %+v", d)
	}
	s.AuthToken, s.Runtime = true, nodeexec.Runtime{Container: &nodeexec.Container{Name: "ray-node"}}
	if d := m.removeToken(ctx, s, s.Head); d != nil {
		t.Errorf("in a container the token goes with it, yet %+v", d)
	}
	s = twoWorkers()
	before := maps.Clone(s.Workers)
	got, d := m.dropUnreachable(ctx, s, nil)
	if d != nil || !maps.EqualFunc(got.Workers, before, func(a, b NodeSpec) bool { return a.Name == b.Name }) {
		t.Errorf("no worker to check: %v %+v", got.Workers, d)
	}
	if errs := m.startWorkers(ctx, s, nil, "10.0.0.1", nil, "", true, nil); len(errs) != 0 {
		t.Errorf("no worker to start: %v", errs)
	}
	if stopped, d := m.stopChanged(ctx, Update{Old: s, Stop: map[string]StopWorker{"gone": {}}}, "10.0.0.1:6379"); stopped != nil || d != nil {
		t.Errorf("a worker dropped as unreachable is not stopped: %v %+v", stopped, d)
	}
	if d := m.takeBack(ctx, Update{New: s}, "10.0.0.1:6379"); d != nil {
		t.Errorf("nothing started, nothing to take back: %+v", d)
	}
}
