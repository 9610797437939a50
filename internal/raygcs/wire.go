// Package raygcs reads Ray's node table, placement groups and jobs from the
// GCS's own gRPC service, so a plan asks Ray its questions without starting
// Python on the head. The messages are decoded by field number (no
// generated code): only the fields the provider reads, from Ray 2.52.1's
// src/ray/protobuf/gcs.proto, common.proto and gcs_service.proto (read off
// the ray==2.52.1 wheel's descriptors; the same numbers in 2.40–2.52, except
// GetAllNodeInfoRequest, which is why every request here is empty or uses
// only fields that never moved). Anything it cannot read is an error, and
// the caller falls back to the Python script, which uses Ray's own client.
package raygcs

import (
	"encoding/hex"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lab-infra/terraform-provider-spark/internal/pyversion"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// field is one field of a message as read off the wire: v for
// length-delimited fields, x for varint and fixed64 ones.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
	x   uint64
}

// eachField calls f with every field of message b, in wire order.
func eachField(b []byte, f func(field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		fl := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			fl.x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			fl.x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			fl.x = uint64(x32)
		case protowire.BytesType:
			fl.v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(fl); err != nil {
			return err
		}
	}
	return nil
}

// want checks a field's wire type against the one its .proto declares: a
// mismatch means another Ray release laid the message out differently.
func (f field) want(t protowire.Type, name string) error {
	if f.typ != t {
		return fmt.Errorf("%s (field %d) has wire type %d, want %d: another Ray release's layout", name, f.num, f.typ, t)
	}
	return nil
}

// replyStatus reads a reply's GcsStatus (field 1: code 1, message 2) and
// returns it as an error when the code is not OK (0).
func replyStatus(b []byte) error {
	var code uint64
	var msg string
	err := eachField(b, func(f field) error {
		switch f.num {
		case 1:
			if err := f.want(protowire.VarintType, "GcsStatus.code"); err != nil {
				return err
			}
			code = f.x
		case 2:
			msg = string(f.v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("GCS status %d: %s", int32(code), msg)
	}
	return nil
}

// mapEntry reads one entry of a map field: key 1, value 2.
func mapEntry(b []byte) (key string, val field, err error) {
	err = eachField(b, func(f field) error {
		switch f.num {
		case 1:
			key = string(f.v)
		case 2:
			val = f
		}
		return nil
	})
	return key, val, err
}

// doubleEntry reads one entry of a map<string,double>.
func doubleEntry(b []byte, into map[string]float64) error {
	k, v, err := mapEntry(b)
	if err != nil {
		return err
	}
	if v.typ != protowire.Fixed64Type && v.num != 0 {
		return v.want(protowire.Fixed64Type, "map value")
	}
	into[k] = math.Float64frombits(v.x)
	return nil
}

// stringEntry reads one entry of a map<string,string>.
func stringEntry(b []byte, into map[string]string) error {
	k, v, err := mapEntry(b)
	into[k] = string(v.v)
	return err
}

// eachRepeated calls f with every element of the repeated message field num
// of a reply, after checking the reply's status.
func eachRepeated(reply []byte, num protowire.Number, name string, f func([]byte) error) error {
	if err := replyStatusOf(reply); err != nil {
		return err
	}
	return eachField(reply, func(fl field) error {
		if fl.num != num {
			return nil
		}
		if err := fl.want(protowire.BytesType, name); err != nil {
			return err
		}
		return f(fl.v)
	})
}

// replyStatusOf finds a reply's status field (1) and checks it.
func replyStatusOf(reply []byte) error {
	var status error
	err := eachField(reply, func(f field) error {
		if f.num == 1 && f.typ == protowire.BytesType {
			status = replyStatus(f.v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return status
}

// DecodeNodes reads a GetAllNodeInfoReply (node_info_list, field 2) into
// Ray's node table rows. GcsNodeInfo: node_id 1, node_manager_address 2,
// state 7 (ALIVE 0, DEAD 1), node_manager_hostname 8, resources_total 11,
// start_time_ms 23, is_head_node 25, labels 26.
func DecodeNodes(reply []byte) ([]ray.Node, error) {
	nodes := []ray.Node{}
	err := eachRepeated(reply, 2, "node_info_list", func(b []byte) error {
		n := ray.Node{Alive: true, Resources: map[string]float64{}, Labels: map[string]string{}}
		err := eachField(b, func(f field) error {
			switch f.num {
			case 1:
				n.ID = hex.EncodeToString(f.v)
			case 2:
				n.IP = string(f.v)
			case 7:
				n.Alive = f.x == 0
				return f.want(protowire.VarintType, "GcsNodeInfo.state")
			case 8:
				n.Hostname = string(f.v)
			case 23:
				n.StartedMs = f.x
				return f.want(protowire.VarintType, "GcsNodeInfo.start_time_ms")
			case 11:
				return doubleEntry(f.v, n.Resources)
			case 25:
				n.IsHead = f.x != 0
				return f.want(protowire.VarintType, "GcsNodeInfo.is_head_node")
			case 26:
				return stringEntry(f.v, n.Labels)
			}
			return nil
		})
		nodes = append(nodes, n)
		return err
	})
	return nodes, err
}

// PlacementGroupTableData.PlacementGroupState's names by number, as each
// release's src/ray/protobuf/gcs.proto defines them (read from the
// descriptors in the wheels' ray/core/generated/gcs_pb2.py): Ray 2.36.0
// inserted PREPARED = 1, so the same wire number names another state
// before it. Read with the wrong table, a live group reads PREPARED (its
// GPUs look free) and a removed one CREATED (its GPUs look held).
var (
	placementStates236 = map[uint64]string{0: "PENDING", 1: "PREPARED", 2: "CREATED", 3: "REMOVED", 4: "RESCHEDULING"} // 2.36.0 and later
	placementStates235 = map[uint64]string{0: "PENDING", 1: "CREATED", 2: "REMOVED", 3: "RESCHEDULING"}                // up to 2.35.0
)

// placementStates is the state table of the release rayVersion (the
// cluster metadata's ray_version); an unreadable version is an error, as a
// guess could misread every group.
func placementStates(rayVersion string) (map[uint64]string, error) {
	v, err := pyversion.Parse(rayVersion)
	if err != nil {
		return nil, fmt.Errorf("ray_version %q: %w", rayVersion, err)
	}
	if v.AtLeast(2, 36) {
		return placementStates236, nil
	}
	return placementStates235, nil
}

// Group is a placement group as the GCS lists it, with the job that
// created it (to name who holds its GPUs).
type Group struct {
	ray.PlacementGroup
	CreatorJob string // hex job id
}

// DecodePlacementGroups reads a GetAllPlacementGroupReply
// (placement_group_table_data, field 2). PlacementGroupTableData:
// placement_group_id 1, bundles 3, state 5, creator_job_id 6; Bundle:
// unit_resources 2, node_id 3 (empty until placed). The states are named
// as rayVersion's gcs.proto names them.
func DecodePlacementGroups(reply []byte, rayVersion string) ([]Group, error) {
	states, err := placementStates(rayVersion)
	if err != nil {
		return nil, err
	}
	groups := []Group{}
	err = eachRepeated(reply, 2, "placement_group_table_data", func(b []byte) error {
		g := Group{PlacementGroup: ray.PlacementGroup{State: "PENDING", GPUsOn: map[string]float64{}}}
		err := eachField(b, func(f field) error {
			switch f.num {
			case 1:
				g.ID = hex.EncodeToString(f.v)
			case 3:
				return g.addBundle(f.v)
			case 5:
				s, ok := states[f.x]
				if !ok {
					return fmt.Errorf("placement group state %d is not one Ray %s names", f.x, rayVersion)
				}
				g.State = s
			case 6:
				g.CreatorJob = hex.EncodeToString(f.v)
			}
			return nil
		})
		groups = append(groups, g)
		return err
	})
	return groups, err
}

func (g *Group) addBundle(b []byte) error {
	res := map[string]float64{}
	var node string
	err := eachField(b, func(f field) error {
		switch f.num {
		case 2:
			return doubleEntry(f.v, res)
		case 3:
			node = hex.EncodeToString(f.v)
		}
		return nil
	})
	gpus := res["GPU"]
	g.GPUs += gpus
	if node != "" && gpus != 0 {
		g.GPUsOn[node] += gpus
	}
	return err
}

// Job is one row of the GCS's job table: who a placement group's creator is.
type Job struct {
	ID         string // hex
	Entrypoint string
	DriverPID  int64
	DriverIP   string
}

// DecodeJobs reads a GetAllJobInfoReply (job_info_list, field 2).
// JobTableData: job_id 1, driver_pid 5, entrypoint 9, driver_address 12
// (Address.ip_address 2).
func DecodeJobs(reply []byte) (map[string]Job, error) {
	jobs := map[string]Job{}
	err := eachRepeated(reply, 2, "job_info_list", func(b []byte) error {
		var j Job
		err := eachField(b, func(f field) error {
			switch f.num {
			case 1:
				j.ID = hex.EncodeToString(f.v)
			case 5:
				j.DriverPID = int64(f.x)
				return f.want(protowire.VarintType, "JobTableData.driver_pid")
			case 9:
				j.Entrypoint = string(f.v)
			case 12:
				return eachField(f.v, func(a field) error {
					if a.num == 2 {
						j.DriverIP = string(a.v)
					}
					return nil
				})
			}
			return nil
		})
		jobs[j.ID] = j
		return err
	})
	return jobs, err
}

// DecodeKV reads an InternalKVGetReply: status 1, value 2. A key the GCS
// does not hold comes back as status NotFound (17).
func DecodeKV(reply []byte) ([]byte, error) {
	if err := replyStatusOf(reply); err != nil {
		return nil, err
	}
	var v []byte
	err := eachField(reply, func(f field) error {
		if f.num == 2 {
			v = f.v
		}
		return nil
	})
	return v, err
}
