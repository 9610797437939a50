package sim

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lab-infra/terraform-provider-spark/internal/pyversion"
	"github.com/lab-infra/terraform-provider-spark/internal/raygcs"
)

// The simulated GCS's gRPC service: the four calls the provider makes
// (internal/raygcs), answered from the same model NodesScript's answer
// comes from (gcsTables), in the wire layout of Ray 2.52.1's gcs.proto,
// common.proto and gcs_service.proto (field numbers as internal/raygcs
// documents them). A test double, as the rest of this package: it checks
// the auth token as Ray's GCS does when the cluster has one
// (src/ray/rpc/authentication, Ray 2.52.1: a call without the cluster's
// token is refused UNAUTHENTICATED).

// serveGCS serves the GCS at gcsAddr on one tunnel from node i, until the
// provider closes it.
func (m *Model) serveGCS(i int, gcsAddr string, ch ssh.Channel) {
	srv := grpc.NewServer(grpc.ForceServerCodec(raygcs.RawCodec{}),
		grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error { return m.gcsCall(i, gcsAddr, st) }))
	defer srv.Stop()
	_ = srv.Serve(newOneConnListener(&channelConn{Channel: ch}))
}

// gcsCall answers one unary call.
func (m *Model) gcsCall(i int, gcsAddr string, st grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(st)
	var req []byte
	if err := st.RecvMsg(&req); err != nil {
		return err
	}
	if err := m.checkToken(i, st); err != nil {
		return err
	}
	up, version, rows, pgs := m.gcsTables(gcsAddr)
	if !up {
		return status.Error(codes.Unavailable, "the GCS stopped")
	}
	m.mu.Lock()
	otherLayout := m.otherGCSLayout
	m.mu.Unlock()
	var reply []byte
	switch method {
	case "/ray.rpc.NodeInfoGcsService/GetAllNodeInfo":
		reply = nodesReply(rows, otherLayout)
	case "/ray.rpc.PlacementGroupInfoGcsService/GetAllPlacementGroup":
		reply = groupsReply(pgs, version)
	case "/ray.rpc.JobInfoGcsService/GetAllJobInfo":
		reply = jobsReply(pgs)
	case "/ray.rpc.InternalKVGcsService/InternalKVGet":
		reply = kvReply(req, version)
	default:
		return status.Errorf(codes.Unimplemented, "the simulated GCS does not serve %s", method)
	}
	return st.SendMsg(&reply)
}

// checkToken refuses a call that does not carry the token the head holds,
// when it holds one (ray start was given RAY_AUTH_MODE=token and the token
// the provider wrote).
func (m *Model) checkToken(i int, st grpc.ServerStream) error {
	m.mu.Lock()
	want := m.tokens[i]
	m.mu.Unlock()
	if want == "" {
		return nil
	}
	md, _ := metadata.FromIncomingContext(st.Context())
	for _, v := range md.Get("authorization") {
		if v == "Bearer "+want {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "Invalid or missing authentication token")
}

// The messages, built by field number.

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendString(b []byte, num protowire.Number, v string) []byte {
	return appendBytes(b, num, []byte(v))
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

// appendDoubles appends a map<string,double> field, its keys in order.
func appendDoubles(b []byte, num protowire.Number, m map[string]float64) []byte {
	for _, k := range sortedKeys(m) {
		e := appendString(nil, 1, k)
		e = protowire.AppendFixed64(protowire.AppendTag(e, 2, protowire.Fixed64Type), math.Float64bits(m[k]))
		b = appendBytes(b, num, e)
	}
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func unhex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

// okStatus is a reply's GcsStatus (field 1) with code OK.
var okStatus = appendBytes(nil, 1, nil)

// nodesReply is a GetAllNodeInfoReply: node_info_list (2) of GcsNodeInfo.
// otherLayout sends state (7) length-delimited, as a Ray release that laid
// the message out otherwise would: the provider's decoder must refuse it.
func nodesReply(rows []tableRow, otherLayout bool) []byte {
	b := append([]byte(nil), okStatus...)
	for _, r := range rows {
		n := appendBytes(nil, 1, unhex(r.ID))
		n = appendString(n, 2, r.IP)
		state := uint64(0) // ALIVE
		if !r.Alive {
			state = 1 // DEAD
		}
		if otherLayout {
			n = appendBytes(n, 7, []byte{byte(state)})
		} else {
			n = appendVarint(n, 7, state)
		}
		n = appendString(n, 8, r.Hostname)
		n = appendDoubles(n, 11, r.Resources)
		if r.IsHead {
			n = appendVarint(n, 25, 1)
		}
		for _, k := range sortedKeys(r.Labels) {
			n = appendBytes(n, 26, appendString(appendString(nil, 1, k), 2, r.Labels[k]))
		}
		b = appendBytes(b, 2, n)
	}
	return appendVarint(b, 3, uint64(len(rows))) // total
}

// jobID is the 4-byte job ID of a placement group's driver.
func (pg placementGroup) jobID() []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(pg.driverPID))
}

// placementStateNumber is state's number in PlacementGroupTableData's
// enum as the release version numbers it: Ray 2.36.0 inserted PREPARED = 1
// (the wheels' ray/core/generated/gcs_pb2.py of 2.35.0 and 2.36.0).
func placementStateNumber(state, version string) uint64 {
	names := []string{"PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING"}
	if v, err := pyversion.Parse(version); err == nil && !v.AtLeast(2, 36) {
		names = []string{"PENDING", "CREATED", "REMOVED", "RESCHEDULING"}
	}
	return uint64(slices.Index(names, state))
}

// groupsReply is a GetAllPlacementGroupReply: placement_group_table_data
// (2), each with its bundles (3: unit_resources 2, node_id 3), state (5,
// numbered as the head's release numbers it) and creator_job_id (6).
func groupsReply(pgs []placementGroup, version string) []byte {
	b := append([]byte(nil), okStatus...)
	for _, pg := range pgs {
		g := appendBytes(nil, 1, unhex(pg.ID))
		for _, node := range sortedKeys(pg.GPUsOn) {
			for k := 0; k < int(pg.GPUsOn[node]); k++ {
				g = appendBytes(g, 3, appendBytes(appendDoubles(nil, 2, map[string]float64{"GPU": 1}), 3, unhex(node)))
			}
		}
		for left := pg.GPUs - sumValues(pg.GPUsOn); left > 0; left-- {
			g = appendBytes(g, 3, appendDoubles(nil, 2, map[string]float64{"GPU": 1})) // not placed
		}
		g = appendVarint(g, 5, placementStateNumber(pg.State, version))
		g = appendBytes(g, 6, pg.jobID())
		b = appendBytes(b, 2, g)
	}
	return b
}

func sumValues(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// jobsReply is a GetAllJobInfoReply: job_info_list (2) of JobTableData,
// one per placement group's driver: job_id 1, driver_pid 5, entrypoint 9,
// driver_address 12 (ip_address 2).
func jobsReply(pgs []placementGroup) []byte {
	b := append([]byte(nil), okStatus...)
	for _, pg := range pgs {
		j := appendBytes(nil, 1, pg.jobID())
		j = appendVarint(j, 5, uint64(pg.driverPID))
		j = appendString(j, 9, "VLLM::EngineCore")
		j = appendBytes(j, 12, appendString(nil, 2, pg.driverIP))
		b = appendBytes(b, 2, j)
	}
	return b
}

// kvReply answers InternalKVGet: the cluster metadata (namespace
// "cluster", key CLUSTER_METADATA) holds the head's Ray version; any other
// key is NotFound (17), as the GCS answers.
func kvReply(req []byte, version string) []byte {
	var key, ns string
	for len(req) > 0 {
		num, typ, n := protowire.ConsumeTag(req)
		if n < 0 {
			break
		}
		req = req[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, req)
			if n < 0 {
				break
			}
			req = req[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(req)
		if n < 0 {
			break
		}
		req = req[n:]
		switch num {
		case 1:
			key = string(v)
		case 2:
			ns = string(v)
		}
	}
	if key != "CLUSTER_METADATA" || ns != "cluster" {
		return appendBytes(nil, 1, appendString(appendVarint(nil, 1, 17), 2, "key not found"))
	}
	return appendString(append([]byte(nil), okStatus...), 2, fmt.Sprintf(`{"ray_version": %q, "python_version": %q}`, version, PythonVersion))
}

// channelConn is an SSH channel as the net.Conn gRPC serves on. Deadlines
// are not kept: the provider bounds its own calls.
type channelConn struct {
	ssh.Channel
	closeOnce sync.Once
	closed    chan struct{}
}

type tunnelAddr struct{}

func (tunnelAddr) Network() string { return "ssh-tunnel" }
func (tunnelAddr) String() string  { return "ssh-tunnel" }

func (c *channelConn) LocalAddr() net.Addr              { return tunnelAddr{} }
func (c *channelConn) RemoteAddr() net.Addr             { return tunnelAddr{} }
func (c *channelConn) SetDeadline(time.Time) error      { return nil }
func (c *channelConn) SetReadDeadline(time.Time) error  { return nil }
func (c *channelConn) SetWriteDeadline(time.Time) error { return nil }

func (c *channelConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Channel.Close()
}

// oneConnListener hands gRPC one connection, then reports itself closed
// once that connection is.
type oneConnListener struct {
	conn *channelConn
	once sync.Once
}

func newOneConnListener(c *channelConn) *oneConnListener {
	c.closed = make(chan struct{})
	return &oneConnListener{conn: c}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.conn })
	if c != nil {
		return c, nil
	}
	<-l.conn.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return tunnelAddr{} }

// runParents answers raygcs.ParentsScript on node i: a placement group's
// driver (pid+1 of a vllm serve there) has that serve as its parent.
func runParents(m *Model, i int, c call, s stdio) uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range c.args {
		for _, v := range m.vllms[i] {
			if a == strconv.Itoa(v.pid+1) {
				fmt.Fprintf(s.out, "@@parent %d %d %s \n", v.pid+1, v.pid, strings.Join(v.cmdline, " "))
			}
		}
	}
	return 0
}
