package raygcs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// releaseDescriptors is one Ray release's definitions of what the reader
// decodes (testdata/descriptors, written by scripts/ray_descriptors.py from
// the release's wheel): fields by message and name, enum values by name.
type releaseDescriptors struct {
	RayVersion string                                        `json:"ray_version"`
	Messages   map[string]map[string]struct{ Number uint64 } `json:"messages"`
	Enums      map[string]map[string]uint64                  `json:"enums"`
}

func loadDescriptors(t *testing.T) []releaseDescriptors {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "descriptors", "ray-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no descriptors: %v", err)
	}
	var out []releaseDescriptors
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d releaseDescriptors
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, d)
	}
	return out
}

// field is a field of message m in release d, by name: the test fails
// when the release has no such field (the reader would read nothing).
func (d releaseDescriptors) field(t *testing.T, m, name string, v any) kv {
	t.Helper()
	f, ok := d.Messages[m][name]
	if !ok {
		t.Fatalf("Ray %s: %s has no field %s", d.RayVersion, m, name)
	}
	return kv{protowireNumber(f.Number), v}
}

func (d releaseDescriptors) enum(t *testing.T, e, name string) uint64 {
	t.Helper()
	n, ok := d.Enums[e][name]
	if !ok {
		t.Fatalf("Ray %s: %s has no value %s", d.RayVersion, e, name)
	}
	return n
}

// The GCS reader against every release's own message definitions (2.9.3,
// 2.35.0, 2.36.0 and each minor from 2.40.0 to 2.60.0): replies built by
// field and enum value NAME from the release's descriptors decode to what
// they say. A field renumbered in a release, or the reader's state table
// swapped for another release's, fails here without a lab.
func TestReaderAgainstEachReleasesDescriptors(t *testing.T) {
	releases := loadDescriptors(t)
	var versions []string
	for _, d := range releases {
		versions = append(versions, d.RayVersion)
	}
	for _, want := range []string{"2.9.3", "2.35.0", "2.36.0", "2.40.0", "2.52.0", "2.60.0"} {
		if !slices.Contains(versions, want) {
			t.Errorf("no descriptors of Ray %s", want)
		}
	}
	for _, d := range releases {
		t.Run(d.RayVersion, func(t *testing.T) {
			status := d.field(t, "GetAllNodeInfoReply", "status", msg())
			entry := func(k string, v any) []byte { return msg(kv{1, k}, kv{2, v}) }
			node := func(id byte, ip string, state string, head bool) []byte {
				isHead := uint64(0)
				if head {
					isHead = 1
				}
				return msg(d.field(t, "GcsNodeInfo", "node_id", []byte{id}), d.field(t, "GcsNodeInfo", "node_manager_address", ip),
					d.field(t, "GcsNodeInfo", "state", d.enum(t, "GcsNodeInfo.GcsNodeState", state)),
					d.field(t, "GcsNodeInfo", "node_manager_hostname", "spark-"+ip),
					d.field(t, "GcsNodeInfo", "resources_total", entry("GPU", 1.0)),
					d.field(t, "GcsNodeInfo", "start_time_ms", uint64(1700000000000)),
					d.field(t, "GcsNodeInfo", "is_head_node", isHead),
					d.field(t, "GcsNodeInfo", "labels", entry("rack", "r1")))
			}
			nodes, err := DecodeNodes(msg(status, d.field(t, "GetAllNodeInfoReply", "node_info_list", node(0xa1, "10.0.0.1", "ALIVE", true)),
				d.field(t, "GetAllNodeInfoReply", "node_info_list", node(0xa2, "10.0.0.2", "DEAD", false))))
			if err != nil {
				t.Fatal(err)
			}
			wantNodes := []ray.Node{
				{ID: "a1", Alive: true, IP: "10.0.0.1", Hostname: "spark-10.0.0.1", IsHead: true, Resources: map[string]float64{"GPU": 1}, Labels: map[string]string{"rack": "r1"}, StartedMs: 1700000000000},
				{ID: "a2", Alive: false, IP: "10.0.0.2", Hostname: "spark-10.0.0.2", Resources: map[string]float64{"GPU": 1}, Labels: map[string]string{"rack": "r1"}, StartedMs: 1700000000000},
			}
			if diff := cmp.Diff(wantNodes, nodes); diff != "" {
				t.Errorf("node table:\n%s", diff)
			}

			var groups [][]byte
			states := d.Enums["PlacementGroupTableData.PlacementGroupState"]
			var names []string
			for name := range states {
				names = append(names, name)
			}
			slices.Sort(names)
			for i, name := range names {
				bundle := msg(d.field(t, "Bundle", "unit_resources", entry("GPU", 1.0)), d.field(t, "Bundle", "node_id", []byte{0xa1}))
				groups = append(groups, msg(d.field(t, "PlacementGroupTableData", "placement_group_id", []byte{byte(i)}),
					d.field(t, "PlacementGroupTableData", "bundles", bundle),
					d.field(t, "PlacementGroupTableData", "state", states[name]),
					d.field(t, "PlacementGroupTableData", "creator_job_id", []byte{0x02, 0, 0, 0})))
			}
			reply := []kv{d.field(t, "GetAllPlacementGroupReply", "status", msg())}
			for _, g := range groups {
				reply = append(reply, d.field(t, "GetAllPlacementGroupReply", "placement_group_table_data", g))
			}
			got, err := DecodePlacementGroups(msg(reply...), d.RayVersion)
			if err != nil {
				t.Fatal(err)
			}
			for i, name := range names {
				if got[i].State != name || got[i].GPUsOn["a1"] != 1 || got[i].CreatorJob != "02000000" {
					t.Errorf("group in state %s read as %+v", name, got[i])
				}
			}

			job := msg(d.field(t, "JobTableData", "job_id", []byte{0x02, 0, 0, 0}), d.field(t, "JobTableData", "driver_pid", uint64(4242)),
				d.field(t, "JobTableData", "entrypoint", "VLLM::EngineCore"),
				d.field(t, "JobTableData", "driver_address", msg(d.field(t, "Address", "ip_address", "10.0.0.1"))))
			jobs, err := DecodeJobs(msg(d.field(t, "GetAllJobInfoReply", "status", msg()), d.field(t, "GetAllJobInfoReply", "job_info_list", job)))
			if err != nil {
				t.Fatal(err)
			}
			if j := jobs["02000000"]; j.DriverPID != 4242 || j.DriverIP != "10.0.0.1" || !strings.Contains(j.Entrypoint, "EngineCore") {
				t.Errorf("jobs = %+v", jobs)
			}

			v, err := DecodeKV(msg(d.field(t, "InternalKVGetReply", "status", msg()), d.field(t, "InternalKVGetReply", "value", `{"ray_version": "`+d.RayVersion+`"}`)))
			if err != nil || !strings.Contains(string(v), d.RayVersion) {
				t.Errorf("kv = %q, %v", v, err)
			}
		})
	}
}

func protowireNumber(n uint64) protowire.Number { return protowire.Number(n) }
