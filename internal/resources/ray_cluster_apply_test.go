package resources

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
)

// Unit tests of what spark_ray_cluster's apply, refresh and import decide
// or write themselves (ray_cluster.go); raycluster does the work on the
// nodes.

func TestFill(t *testing.T) {
	m := plannedCluster()
	m.Head.RegisteredIP = types.StringValue("10.0.0.1")
	m.Workers["w"].RegisteredIP = types.StringValue("10.0.0.2")
	m.Workers["gone"] = plannedNode("spark3")
	m.Workers["gone"].RegisteredIP = types.StringValue("10.0.0.3")
	m.Workers["gone"].NumGPUs = types.Int64Unknown()
	m.Workers["gone"].Resources, m.Workers["gone"].Labels = types.MapUnknown(types.Float64Type), types.MapUnknown(types.StringType)
	fill(m, ray.Table{GCSUp: true, RayVersion: "2.52.1", Nodes: []ray.Node{
		{ID: "h", Alive: true, IP: "10.0.0.1", IsHead: true, Resources: map[string]float64{"GPU": 1, "CPU": 20, "node:10.0.0.1": 1},
			Labels: map[string]string{"ray.io/node_id": "h"}},
		{ID: "w1", Alive: true, IP: "10.0.0.2", Resources: map[string]float64{"GPU": 2, "spark.a": 1}, Labels: map[string]string{"rack": "r1"}},
		{ID: "old", Alive: false, IP: "10.0.0.3"},
	}})
	if m.RayVersion.ValueString() != "2.52.1" || m.HeadAddress.ValueString() != "10.0.0.1:6379" {
		t.Errorf("cluster: %v %v", m.RayVersion, m.HeadAddress)
	}
	h := m.Head
	if h.NodeID.ValueString() != "h" || !h.Alive.ValueBool() || h.NumGPUs.ValueInt64() != 1 || len(h.Resources.Elements()) != 0 || len(h.Labels.Elements()) != 0 {
		t.Errorf("head: id %v alive %v gpus %v resources %v labels %v (Ray's own are not ours)", h.NodeID, h.Alive, h.NumGPUs, h.Resources, h.Labels)
	}
	w := m.Workers["w"]
	if w.NodeID.ValueString() != "w1" || w.NumGPUs.ValueInt64() != 2 || len(w.Resources.Elements()) != 1 || len(w.Labels.Elements()) != 1 {
		t.Errorf("worker: id %v gpus %v resources %v labels %v", w.NodeID, w.NumGPUs, w.Resources, w.Labels)
	}
	g := m.Workers["gone"]
	if g.Alive.ValueBool() || !g.NodeID.IsNull() || !g.NumGPUs.IsNull() || !g.Resources.IsNull() || !g.Labels.IsNull() {
		t.Errorf("a worker not alive keeps unknowns: alive %v id %v gpus %v resources %v labels %v", g.Alive, g.NodeID, g.NumGPUs, g.Resources, g.Labels)
	}
	fill(m, ray.Table{GCSUp: true})
	if m.Head.Alive.ValueBool() || m.Head.NodeID.ValueString() != "h" {
		t.Errorf("a head gone from the table: alive %v, node ID %v (kept)", m.Head.Alive, m.Head.NodeID)
	}
}

func TestGCSDown(t *testing.T) {
	state := runningCluster()
	gone, d := gcsDown(state, ray.Table{GCSError: "timed out"})
	if gone || d.Severity() != diag.SeverityWarning || d.Summary() != "Ray's GCS did not answer" ||
		!strings.HasPrefix(d.Detail(), "The head's GCS at 10.0.0.1:6379 did not answer (timed out); the state is kept") {
		t.Errorf("slow GCS: gone %v, %q: %q", gone, d.Summary(), d.Detail())
	}
	gone, d = gcsDown(state, ray.Table{GCSError: "[Errno 111] Connection refused"})
	if !gone || d.Summary() != "Ray cluster is gone" ||
		d.Detail() != "The head's GCS at 10.0.0.1:6379 does not answer ([Errno 111] Connection refused): the cluster will be created again." {
		t.Errorf("refused GCS: gone %v, %q: %q", gone, d.Summary(), d.Detail())
	}
	if gone, _ := gcsDown(state, ray.Table{Gone: true}); !gone {
		t.Error("a container that is not running is a cluster gone")
	}
}

func TestNotAliveWarnings(t *testing.T) {
	state := runningCluster()
	if d := notAliveWarnings(state); len(d) != 0 {
		t.Fatalf("every node alive, yet %v", d)
	}
	state.Head.Alive = types.BoolValue(false)
	state.Workers["b"] = runningNode("spark3", "10.0.0.3")
	state.Workers["b"].Alive = types.BoolValue(false)
	state.Workers["w"].Alive = types.BoolValue(false)
	d := notAliveWarnings(state)
	if len(d) != 2 || d.HasError() {
		t.Fatalf("want two warnings, got %v", d)
	}
	if d[0].Summary() != "Ray head is not alive" || !strings.HasPrefix(d[0].Detail(), "No alive node is registered as 10.0.0.1 in the cluster at 10.0.0.1:6379") {
		t.Errorf("head: %q: %q", d[0].Summary(), d[0].Detail())
	}
	want := "Not alive in Ray's node table: b (spark3, registered as 10.0.0.3); w (spark2, registered as 10.0.0.2). The plan restarts them."
	if d[1].Summary() != "Ray workers not alive" || d[1].Detail() != want {
		t.Errorf("workers: %q: %q", d[1].Summary(), d[1].Detail())
	}
}

func TestAdoptCluster(t *testing.T) {
	head, workers, err := parseClusterImportID("spark1,w=spark2,x=spark3")
	if err != nil {
		t.Fatal(err)
	}
	var m clusterModel
	importedModel(t, NewRayCluster(), importedCluster(head, workers), &m)
	adoptCluster(&m, raycluster.Discovered{HeadIP: "10.0.0.1", GCSPort: 6380, Workers: map[string]string{"w": "10.0.0.2"}, AuthToken: true})
	if m.GCSPort.ValueInt64() != 6380 || m.Head.RegisteredIP.ValueString() != "10.0.0.1" || m.Workers["w"].RegisteredIP.ValueString() != "10.0.0.2" ||
		!m.Workers["x"].RegisteredIP.IsNull() {
		t.Errorf("addresses: %v %v %v %v", m.GCSPort, m.Head.RegisteredIP, m.Workers["w"].RegisteredIP, m.Workers["x"].RegisteredIP)
	}
	if m.DashboardHost.ValueString() != "127.0.0.1" || m.AuthMode.ValueString() != "token" {
		t.Errorf("defaults: dashboard_host %v auth_mode %v", m.DashboardHost, m.AuthMode)
	}
	m.DashboardHost = types.StringValue("0.0.0.0")
	adoptCluster(&m, raycluster.Discovered{})
	if m.DashboardHost.ValueString() != "0.0.0.0" || m.AuthMode.ValueString() != "disabled" {
		t.Errorf("a set dashboard_host is kept, no token is disabled: %v %v", m.DashboardHost, m.AuthMode)
	}
}

func TestClusterUpdate(t *testing.T) {
	state := runningCluster()
	state.Workers["kept"] = runningNode("spark3", "10.0.0.3")
	state.Workers["dead"] = runningNode("spark4", "10.0.0.4")
	state.Workers["dead"].Alive = types.BoolValue(false)
	state.Workers["removed"] = runningNode("spark5", "10.0.0.5")
	state.Workers["moved"] = runningNode("spark6", "10.0.0.6")
	state.Workers["newuser"] = runningNode("spark7", "10.0.0.7")
	plan := plannedCluster()
	delete(plan.Workers, "w")
	for name, host := range map[string]string{"kept": "spark3", "dead": "spark4", "moved": "spark8", "newuser": "spark7", "added": "spark9"} {
		plan.Workers[name] = plannedNode(host)
		plan.Workers[name].RegisteredIP = types.StringValue("planned-" + name)
	}
	plan.Workers["newuser"].SSHUser = types.StringValue("ops2")
	u := clusterUpdate(plan, state, raycluster.Spec{GCSPort: 1}, raycluster.Spec{GCSPort: 2})
	if u.New.GCSPort != 1 || u.Old.GCSPort != 2 || u.HeadIP != "10.0.0.1" {
		t.Errorf("specs or head IP: %+v", u)
	}
	wantStop := map[string]raycluster.StopWorker{
		"w":       {RegisteredIP: "10.0.0.2", RemoveToken: true, NodeID: "id-spark2"},
		"dead":    {RegisteredIP: "10.0.0.4", NodeID: "id-spark4"},
		"removed": {RegisteredIP: "10.0.0.5", RemoveToken: true, NodeID: "id-spark5"},
		"moved":   {RegisteredIP: "10.0.0.6", RemoveToken: true, NodeID: "id-spark6"},
		"newuser": {RegisteredIP: "10.0.0.7", RemoveToken: true, LeaveSession: true, NodeID: "id-spark7"},
	}
	if len(u.Stop) != len(wantStop) {
		t.Errorf("stop = %+v, want %+v", u.Stop, wantStop)
	}
	for name, want := range wantStop {
		if got, ok := u.Stop[name]; !ok || got != want {
			t.Errorf("stop %s = %+v (%v), want %+v", name, got, ok, want)
		}
	}
	if want := []string{"added", "dead", "moved", "newuser"}; !slices.Equal(u.Start, want) {
		t.Errorf("start = %v, want %v", u.Start, want)
	}
	if len(u.Want) != len(plan.Workers) || u.Want["kept"] != "planned-kept" || u.Want["added"] != "planned-added" {
		t.Errorf("want = %v", u.Want)
	}
}

func TestParseClusterImportID(t *testing.T) {
	for _, c := range []struct {
		id      string
		head    string
		workers map[string]string
		err     string
	}{
		{id: "10.1.230.180", head: "10.1.230.180"},
		{id: " 10.1.230.180 , spark2=10.1.230.181,spark3=h3", head: "10.1.230.180", workers: map[string]string{"spark2": "10.1.230.181", "spark3": "h3"}},
		{id: "", err: `import ID "": want <head ssh_host>[,<worker name>=<worker ssh_host>...], e.g. "10.1.230.180,spark2=10.1.230.181"`},
		{id: " ,spark2=h", err: `import ID " ,spark2=h": want <head ssh_host>`},
		{id: "h,spark2", err: `import ID part "spark2": want <worker name>=<worker ssh_host>`},
		{id: "h,=h2", err: `import ID part "=h2": want`},
		{id: "h,spark2=", err: `import ID part "spark2=": want`},
	} {
		head, workers, err := parseClusterImportID(c.id)
		switch {
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%q: error %v, want %q", c.id, err, c.err)
		case c.err == "" && (err != nil || head != c.head || len(workers) != len(c.workers)):
			t.Errorf("%q: %q %v %v, want %q %v", c.id, head, workers, err, c.head, c.workers)
		}
		for name, host := range c.workers {
			if workers[name] != host {
				t.Errorf("%q: worker %s = %q, want %q", c.id, name, workers[name], host)
			}
		}
	}
}

func TestImportedCluster(t *testing.T) {
	var m clusterModel
	importedModel(t, NewRayCluster(), importedCluster("spark1", nil), &m)
	if m.Workers != nil || m.ID.ValueString() != "spark1" || m.Head.SSHHost.ValueString() != "spark1" || m.GCSPort.ValueInt64() != 6379 {
		t.Fatalf("head only: %+v", m)
	}
	for _, v := range []attr.Value{m.Head.RegisteredIP, m.Head.NodeIP, m.Head.Alive, m.AuthMode, m.Env, m.StartArgs, m.DashboardHost,
		m.HeadAddress, m.RayVersion, m.Timeouts.Object, m.Head.SSHPort, m.Head.Resources} {
		if !v.IsNull() {
			t.Errorf("%v: want null, Read or the first plan fills it", v)
		}
	}
	m = clusterModel{}
	importedModel(t, NewRayCluster(), importedCluster("spark1", map[string]string{"spark2": "10.1.230.181"}), &m)
	if len(m.Workers) != 1 || m.Workers["spark2"].SSHHost.ValueString() != "10.1.230.181" || !m.Workers["spark2"].RegisteredIP.IsNull() {
		t.Fatalf("worker: %+v", m.Workers)
	}
}

func TestWithGoneHintEndsEveryError(t *testing.T) {
	var d diag.Diagnostics
	d.AddAttributeError(path.Root("workers").AtMapKey("w"), "Cannot stop Ray worker", "refused")
	d.AddWarning("Ray auth token left on head", "detail")
	got := withGoneHint(d)
	if len(got) != 2 || got[0].Detail() != "refused"+goneHint || got[1].Detail() != "detail" ||
		!pathOf(got[0]).Equal(path.Root("workers").AtMapKey("w")) {
		t.Fatalf("got %v", got)
	}
}
