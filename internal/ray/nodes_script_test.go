package ray

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// standInRay is a test double of Ray's Python internals, laid out as the
// ray package is, for NodesScript's paths that a real Ray of another
// release takes. Real older wheels (ray 2.36.0 has cp311 builds) would run
// on this machine, but `make test` downloads nothing and the lab runs one
// Ray release; a second real release in the lab is issue 32's next step,
// and this double goes then. It stands in for: the node table read through
// GcsClient, and the placement groups through internals whose signature
// changed across releases. The double's GcsClientOptions.create refuses
// allow_cluster_id_nil, as releases before 2.37 do.
var standInRay = map[string]string{
	"ray/__init__.py":                "__version__ = '2.36.0'\n",
	"ray/_raylet.py":                 "class GcsClient:\n    def __init__(self, address): pass\n    def get_all_node_info(self, timeout=None): return {}\n\nclass GcsClientOptions:\n    @staticmethod\n    def create(addr, cluster_id):\n        return None\n",
	"ray/_private/__init__.py":       "",
	"ray/_private/state.py":          "class GlobalState:\n    def _initialize_global_state(self, options): pass\n",
	"ray/core/__init__.py":           "",
	"ray/core/generated/__init__.py": "",
	"ray/core/generated/gcs_pb2.py":  "",
}

// A Ray whose internals the script does not know lists no placement
// groups, and says why: the plan then cannot tell which GPUs are free,
// which it must never read as "none held".
func TestNodesScriptSaysWhyThePlacementGroupsAreUnread(t *testing.T) {
	dir := t.TempDir()
	for name, body := range standInRay {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gcs, err := net.Listen("tcp", "127.0.0.1:0") // the script first checks the GCS port answers
	if err != nil {
		t.Fatal(err)
	}
	defer gcs.Close()
	cmd := exec.Command("python3", "-c", NodesScript, gcs.Addr().String())
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	tbl, err := ParseNodes(string(out))
	if err != nil {
		t.Fatal(err)
	}
	if !tbl.GCSUp || tbl.RayVersion != "2.36.0" || len(tbl.PlacementGroups) != 0 {
		t.Errorf("table %+v", tbl)
	}
	if !strings.Contains(tbl.GroupsUnread, "TypeError") || !strings.Contains(tbl.GroupsUnread, "allow_cluster_id_nil") {
		t.Errorf("GroupsUnread = %q, want the TypeError that names the argument", tbl.GroupsUnread)
	}
}
