package ray

import (
	"encoding/json"
	"fmt"
	"strings"
)

// NodesScript prints Ray's registered node table as one JSON line after
// "@@nodes". Its argument is the GCS address (ip:port). It also lists the
// placement groups and the job that created each (GPUs held, and by whom),
// read from the GCS tables (ray/_private/state.py, Ray 2.52.1), so a plan
// can tell how many GPUs are free. A Ray whose internals differ (the
// accessor is 2.52's, allow_cluster_id_nil and the skip_ arguments 2.37's)
// says why it could not list them ("placement_groups_error"): the plan
// then cannot tell which GPUs are free, which is never "none held". It
// reads the GCS
// directly (about half the time of attaching a driver), falls back to
// ray.nodes() where the internal client differs, and reports a GCS that
// does not answer as {"gcs": "down"} rather than failing, so the provider
// can tell "cluster gone" from "cannot tell". Works with the minimal `ray`.
const NodesScript = `
import json, socket, sys
addr = sys.argv[1]
host, port = addr.rsplit(":", 1)
try:
    socket.create_connection((host, int(port)), timeout=3).close()
except OSError as e:
    print("@@nodes " + json.dumps({"gcs": "down", "error": str(e)}))
    sys.exit(0)
import ray
nodes = []
try:
    from ray._raylet import GcsClient
    info = GcsClient(address=addr).get_all_node_info(timeout=15)
    for v in info.values():
        state = v.DESCRIPTOR.fields_by_name["state"].enum_type.values_by_number[v.state].name
        nodes.append({"id": v.node_id.hex(), "alive": state == "ALIVE", "ip": v.node_manager_address,
                      "hostname": v.node_manager_hostname, "is_head": bool(v.is_head_node),
                      "resources": dict(v.resources_total), "labels": dict(v.labels), "started_ms": v.start_time_ms})
except (ImportError, AttributeError, TypeError):
    ray.init(address=addr, logging_level="ERROR", log_to_driver=False)
    for n in ray.nodes():
        res = n.get("Resources") or {}
        nodes.append({"id": n["NodeID"], "alive": bool(n["Alive"]), "ip": n["NodeManagerAddress"],
                      "hostname": n.get("NodeManagerHostname", ""), "is_head": "node:__internal_head__" in res,
                      "resources": res, "labels": n.get("Labels") or {}})
    ray.shutdown()
pgs = []
pg_error = ""
try:
    from ray._private.state import GlobalState
    from ray._raylet import GcsClientOptions
    from ray.core.generated import gcs_pb2
    gs = GlobalState()
    gs._initialize_global_state(GcsClientOptions.create(addr, None, allow_cluster_id_nil=True, fetch_cluster_id_if_nil=False))
    acc = gs._connect_and_get_accessor()
    def holder(j):
        # vLLM's driver is its EngineCore process (setproctitle pads its
        # title with ""); on this node, name the vllm serve that started it.
        what = " ".join(t for t in j.entrypoint.split() if t != '""') or "job " + j.job_id.hex()
        if j.driver_address.ip_address == host:
            try:
                with open("/proc/%d/stat" % j.driver_pid) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open("/proc/%d/cmdline" % ppid, "rb") as f:
                    parent = " ".join(a.decode() for a in f.read().split(b"\0") if a)
                if " serve " in parent:
                    what = "%s (pid %d)" % (parent, ppid)
            except (OSError, ValueError, IndexError):
                pass
        return "%s, driver pid %d on %s" % (what, j.driver_pid, j.driver_address.ip_address)
    jobs = {}
    for raw in acc.get_job_table(skip_submission_job_info_field=True, skip_is_running_tasks_field=True):
        j = gcs_pb2.JobTableData.FromString(raw)
        jobs[j.job_id] = holder(j)
    for raw in acc.get_placement_group_table():
        g = gcs_pb2.PlacementGroupTableData.FromString(raw)
        state = g.DESCRIPTOR.fields_by_name["state"].enum_type.values_by_number[g.state].name
        on = {}
        for b in g.bundles:
            if b.node_id and b.unit_resources.get("GPU", 0):
                on[b.node_id.hex()] = on.get(b.node_id.hex(), 0) + b.unit_resources["GPU"]
        pgs.append({"id": g.placement_group_id.hex(), "state": state,
                    "gpus": sum(b.unit_resources.get("GPU", 0) for b in g.bundles), "gpus_on": on,
                    "holder": jobs.get(g.creator_job_id, "job " + g.creator_job_id.hex())})
except Exception as e:
    pgs, pg_error = [], "%s: %s" % (type(e).__name__, e)
print("@@nodes " + json.dumps({"gcs": "up", "ray_version": ray.__version__, "nodes": nodes, "placement_groups": pgs,
                               "placement_groups_error": pg_error}))
`

// Node is one row of Ray's node table.
type Node struct {
	ID        string             `json:"id"`
	Alive     bool               `json:"alive"`
	IP        string             `json:"ip"` // NodeManagerAddress: what Ray registered
	Hostname  string             `json:"hostname"`
	IsHead    bool               `json:"is_head"`
	Resources map[string]float64 `json:"resources"`
	Labels    map[string]string  `json:"labels"`
	// StartedMs is when the node registered (GcsNodeInfo.start_time_ms);
	// 0 when the reader cannot tell (ray.nodes() has no such field).
	StartedMs uint64 `json:"started_ms"`
}

// PlacementGroup is one of Ray's placement groups: what a vLLM server's
// workers hold their GPUs with.
type PlacementGroup struct {
	ID     string  `json:"id"`
	State  string  `json:"state"`  // PENDING, CREATED, REMOVED, RESCHEDULING
	GPUs   float64 `json:"gpus"`   // the GPUs its bundles reserve
	Holder string  `json:"holder"` // who created it: the driver's command line and address
	// GPUsOn is where its placed bundles' GPUs are: node id -> GPUs
	// (Bundle.node_id of the GCS table; empty while pending).
	GPUsOn map[string]float64 `json:"gpus_on"`
}

// Table is Ray's registered node table as seen from the head.
type Table struct {
	// Gone: Ray cannot be running at all (the runtime's container is not
	// running), which GCSGone takes as proof, like a refused connection.
	Gone            bool
	GCSUp           bool
	GCSError        string
	RayVersion      string
	Nodes           []Node
	PlacementGroups []PlacementGroup // only when asked for (NodesScript's second argument)
	// GroupsUnread is why the placement groups could not be read ("" when
	// they were): the GPUs they hold are then not known, never zero.
	GroupsUnread string
}

// GCSGone reports whether the GCS is known to be gone, not just slow: the
// head's own connection to its GCS port was refused (nothing listens
// there). A timeout or any other error may pass, and proves nothing.
func (t Table) GCSGone() bool {
	return t.Gone || !t.GCSUp && strings.Contains(strings.ToLower(t.GCSError), "connection refused")
}

// NotRunningLine is what the node-table read prints, instead of running
// NodesScript, when the runtime's container is not running.
func NotRunningLine(container string) string {
	b, _ := json.Marshal(map[string]any{"gcs": "down", "gone": true, "error": "container " + container + " is not running"})
	return "@@nodes " + string(b)
}

// ParseNodes reads NodesScript's output.
func ParseNodes(out string) (Table, error) {
	for _, line := range strings.Split(out, "\n") {
		raw, ok := strings.CutPrefix(line, "@@nodes ")
		if !ok {
			continue
		}
		var v struct {
			GCS        string           `json:"gcs"`
			Gone       bool             `json:"gone"`
			Error      string           `json:"error"`
			RayVersion string           `json:"ray_version"`
			Nodes      []Node           `json:"nodes"`
			PGs        []PlacementGroup `json:"placement_groups"`
			PGError    string           `json:"placement_groups_error"`
		}
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return Table{}, fmt.Errorf("parse Ray node table: %w", err)
		}
		return Table{Gone: v.Gone, GCSUp: v.GCS == "up", GCSError: v.Error, RayVersion: v.RayVersion, Nodes: v.Nodes, PlacementGroups: v.PGs,
			GroupsUnread: v.PGError}, nil
	}
	return Table{}, fmt.Errorf("no Ray node table in the output: %q", tail(out))
}

// FreeGPUs is what node holds of GPUs outside every created placement
// group: vLLM's legacy executor needs one there for its driver
// (available_resources_per_node, vllm/v1/executor/ray_utils.py L629-633,
// 0.32.0).
func (t Table) FreeGPUs(n Node) float64 {
	free := n.Resources["GPU"]
	for _, g := range t.PlacementGroups {
		if g.State == "CREATED" {
			free -= g.GPUsOn[n.ID]
		}
	}
	return max(free, 0)
}

// Head is the alive head node, if any.
func (t Table) Head() (Node, bool) {
	for _, n := range t.Nodes {
		if n.Alive && n.IsHead {
			return n, true
		}
	}
	return Node{}, false
}

// Alive returns the alive node registered under ip, if any. Dead rows of
// an earlier incarnation with the same IP are skipped; of two alive ones
// (a node killed without a word is listed alive until the GCS's health
// checks fail, beside its restart) the one that registered last.
func (t Table) Alive(ip string) (Node, bool) { return t.AliveExcept(ip, nil) }

// AliveExcept is Alive, not counting the nodes whose IDs are stale (the
// incarnations an apply just stopped, which the GCS may still list alive).
func (t Table) AliveExcept(ip string, stale map[string]bool) (Node, bool) {
	var found Node
	ok := false
	for _, n := range t.Nodes {
		if n.Alive && n.IP == ip && !stale[n.ID] && (!ok || n.StartedMs > found.StartedMs) {
			found, ok = n, true
		}
	}
	return found, ok
}

func tail(s string) string {
	if len(s) > 300 {
		return "…" + s[len(s)-300:]
	}
	return s
}
