package raygcs

import (
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// msg builds a message from fields: each value is a []byte (length-
// delimited), a uint64 (varint) or a float64 (fixed64), by field number.
type kv struct {
	num protowire.Number
	v   any
}

func msg(fields ...kv) []byte {
	var b []byte
	for _, f := range fields {
		switch v := f.v.(type) {
		case []byte:
			b = protowire.AppendBytes(protowire.AppendTag(b, f.num, protowire.BytesType), v)
		case string:
			b = protowire.AppendBytes(protowire.AppendTag(b, f.num, protowire.BytesType), []byte(v))
		case uint64:
			b = protowire.AppendVarint(protowire.AppendTag(b, f.num, protowire.VarintType), v)
		case float64:
			b = protowire.AppendFixed64(protowire.AppendTag(b, f.num, protowire.Fixed64Type), math.Float64bits(v))
		}
	}
	return b
}

func ok() kv { return kv{1, msg()} }

func TestDecodeNodes(t *testing.T) {
	head := msg(kv{1, []byte{0xab, 0xcd}}, kv{2, "10.0.0.1"}, kv{8, "spark1"}, kv{25, uint64(1)},
		kv{11, msg(kv{1, "GPU"}, kv{2, 1.0})}, kv{11, msg(kv{1, "CPU"}, kv{2, 2.0})},
		kv{26, msg(kv{1, "ray.io/node-id"}, kv{2, "abcd"})},
		kv{28, msg(kv{1, uint64(2)})}) // state_snapshot: ignored
	dead := msg(kv{1, []byte{0x01}}, kv{2, "10.0.0.2"}, kv{7, uint64(1)})
	got, err := DecodeNodes(msg(ok(), kv{2, head}, kv{2, dead}, kv{3, uint64(2)}))
	if err != nil {
		t.Fatal(err)
	}
	want := []ray.Node{
		{ID: "abcd", Alive: true, IP: "10.0.0.1", Hostname: "spark1", IsHead: true,
			Resources: map[string]float64{"GPU": 1, "CPU": 2}, Labels: map[string]string{"ray.io/node-id": "abcd"}},
		{ID: "01", Alive: false, IP: "10.0.0.2", Resources: map[string]float64{}, Labels: map[string]string{}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}

func TestDecodeRefusesWhatItCannotRead(t *testing.T) {
	for name, reply := range map[string][]byte{
		"status not OK":         msg(kv{1, msg(kv{1, uint64(17)}, kv{2, "NotFound"})}),
		"truncated":             msg(ok(), kv{2, msg(kv{2, "10.0.0.1"})})[:6],
		"state as a string":     msg(ok(), kv{2, msg(kv{7, "DEAD"})}),
		"resources not doubles": msg(ok(), kv{2, msg(kv{11, msg(kv{1, "GPU"}, kv{2, uint64(1)})})}),
		"a list as a varint":    msg(ok(), kv{2, uint64(3)}),
	} {
		if _, err := DecodeNodes(reply); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
	if _, err := DecodePlacementGroups(msg(ok(), kv{2, msg(kv{5, uint64(9)})}), "2.52.1"); err == nil {
		t.Error("a placement group state Ray does not name was read")
	}
	if _, err := DecodeKV(msg(kv{1, msg(kv{1, uint64(17)})})); err == nil {
		t.Error("a key the GCS lacks was read as empty")
	}
}

func TestDecodePlacementGroupsAndJobs(t *testing.T) {
	bundle := func(gpus float64, node []byte) kv {
		return kv{3, msg(kv{1, msg(kv{1, []byte{1}})}, kv{2, msg(kv{1, "GPU"}, kv{2, gpus})}, kv{2, msg(kv{1, "CPU"}, kv{2, 1.0})}, kv{3, node})}
	}
	created := msg(kv{1, []byte{0x0a}}, bundle(1, []byte{0xab}), bundle(1, []byte{0xcd}), kv{5, uint64(2)}, kv{6, []byte{0x02, 0, 0, 0}})
	pending := msg(kv{1, []byte{0x0b}}, bundle(2, nil), kv{6, []byte{0x03, 0, 0, 0}})
	groups, err := DecodePlacementGroups(msg(ok(), kv{2, created}, kv{2, pending}), "2.52.1")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := DecodeJobs(msg(ok(), kv{2, msg(kv{1, []byte{0x02, 0, 0, 0}}, kv{5, uint64(4242)}, kv{9, `VLLM::EngineCore "" ""`},
		kv{12, msg(kv{1, []byte{0xab}}, kv{2, "10.0.0.1"})})}))
	if err != nil {
		t.Fatal(err)
	}
	r := Reading{Groups: groups, Jobs: jobs, RayVersion: "2.52.1"}
	if got := r.DriversOn("10.0.0.1"); len(got) != 1 || got[0] != 4242 {
		t.Fatalf("drivers on the head: %v", got)
	}
	named := r.Table("10.0.0.1", map[int64]Parent{4242: {PID: 4200, Cmdline: "/opt/vllm/bin/vllm serve /models/tiny --port 8000"}})
	want := []ray.PlacementGroup{
		{ID: "0a", State: "CREATED", GPUs: 2, GPUsOn: map[string]float64{"ab": 1, "cd": 1},
			Holder: "/opt/vllm/bin/vllm serve /models/tiny --port 8000 (pid 4200), driver pid 4242 on 10.0.0.1"},
		{ID: "0b", State: "PENDING", GPUs: 2, GPUsOn: map[string]float64{}, Holder: "job 03000000"},
	}
	if d := cmp.Diff(want, named.PlacementGroups); d != "" {
		t.Fatal(d)
	}
	// Without its parent (or off the head), the driver's own title names it.
	if got := r.Table("10.0.0.9", nil).PlacementGroups[0].Holder; got != "VLLM::EngineCore, driver pid 4242 on 10.0.0.1" {
		t.Fatalf("holder off the head: %q", got)
	}
}

// The script runs for real here, on this machine's /proc: a child's
// parent is this test's shell, whose command line it prints.
func TestParentsScriptReadsProc(t *testing.T) {
	out, err := exec.Command("sh", "-c", `echo "self $$"; sleep 5 & p=$!; sh -c "$1" sh "$p" 999999999; kill $p`, "parents", ParentsScript).Output()
	if err != nil {
		t.Fatal(err)
	}
	parents := ParseParents(string(out))
	if len(parents) != 1 {
		t.Fatalf("want one parent (the dead pid is skipped), got %v from %q", parents, out)
	}
	for _, p := range parents {
		if p.PID <= 1 || !strings.Contains(p.Cmdline, "sleep 5") {
			t.Fatalf("parent %+v: want the shell that started sleep", p)
		}
		if !strings.HasPrefix(string(out), "self "+strconv.FormatInt(p.PID, 10)+"\n") {
			t.Fatalf("parent %d is not the shell: %q", p.PID, out)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(msg(ok(), kv{2, msg(kv{1, []byte{1}}, kv{11, msg(kv{1, "GPU"}, kv{2, 1.0})})}))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Never a panic, whatever the bytes.
		_, _ = DecodeNodes(b)
		_, _ = DecodePlacementGroups(b, "2.52.1")
		_, _ = DecodePlacementGroups(b, "2.35.0")
		_, _ = DecodeJobs(b)
		_, _ = DecodeKV(b)
	})
}

// The same wire number is another state before Ray 2.36.0, which inserted
// PREPARED = 1 into PlacementGroupTableData.PlacementGroupState. The
// numbering is each release's own, read from the descriptors its wheel
// ships (ray/core/generated/gcs_pb2.py of ray-2.35.0 and ray-2.36.0):
//
//	2.35.0: PENDING 0, CREATED 1, REMOVED 2, RESCHEDULING 3
//	2.36.0: PENDING 0, PREPARED 1, CREATED 2, REMOVED 3, RESCHEDULING 4
//
// A live group of a 2.35 cluster read with 2.36's names would look
// PREPARED (its GPUs free), a removed one CREATED (its GPUs held).
func TestPlacementGroupStatesPerRelease(t *testing.T) {
	byRelease := map[string][]string{
		"2.9.3":  {"PENDING", "CREATED", "REMOVED", "RESCHEDULING"},
		"2.35.0": {"PENDING", "CREATED", "REMOVED", "RESCHEDULING"},
		"2.36.0": {"PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING"},
		"2.52.1": {"PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING"},
		"2.60.0": {"PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING"},
	}
	for release, names := range byRelease {
		for n, want := range names {
			groups, err := DecodePlacementGroups(msg(ok(), kv{2, msg(kv{1, []byte{1}}, kv{5, uint64(n)})}), release)
			if err != nil || len(groups) != 1 || groups[0].State != want {
				t.Errorf("Ray %s, state %d: %v, %v; want %s", release, n, groups, err, want)
			}
		}
		if _, err := DecodePlacementGroups(msg(ok(), kv{2, msg(kv{5, uint64(len(names))})}), release); err == nil {
			t.Errorf("Ray %s: state %d, which it does not name, was read", release, len(names))
		}
	}
	if _, err := DecodePlacementGroups(msg(ok()), "not a version"); err == nil {
		t.Error("an unreadable ray_version was taken for a release")
	}
}
