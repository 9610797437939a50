package raygcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// The GCS's methods the provider calls (src/ray/protobuf/gcs_service.proto,
// Ray 2.52.1; the same names since 2.40).
const (
	methodNodes  = "/ray.rpc.NodeInfoGcsService/GetAllNodeInfo"
	methodGroups = "/ray.rpc.PlacementGroupInfoGcsService/GetAllPlacementGroup"
	methodJobs   = "/ray.rpc.JobInfoGcsService/GetAllJobInfo"
	methodKVGet  = "/ray.rpc.InternalKVGcsService/InternalKVGet"
)

// Reading is what the GCS answered: the node table, the placement groups
// with their creators' jobs, and the Ray version the head recorded.
type Reading struct {
	Nodes      []ray.Node
	Groups     []Group
	Jobs       map[string]Job
	RayVersion string
}

// Dial opens a TCP connection to addr as the node sees it (an SSH tunnel).
type Dial func(ctx context.Context, network, addr string) (net.Conn, error)

// Read asks the GCS at gcsAddr for its tables over one connection from
// dial. token is Ray's auth token ("" when the cluster runs without one):
// the GCS checks it on every call, as "authorization: Bearer <token>"
// (python/ray/_private/authentication/grpc_authentication_client_interceptor.py,
// Ray 2.52.1). No cluster ID is sent: the GCS accepts a call without one,
// as Ray's own tools make them (python/ray/_private/services.py L190-196).
func Read(ctx context.Context, dial Dial, gcsAddr, token string) (Reading, error) {
	conn, err := dial(ctx, "tcp", gcsAddr)
	if err != nil {
		return Reading{}, err
	}
	cc, err := newClient(conn)
	if err != nil {
		_ = conn.Close()
		return Reading{}, err
	}
	defer func() { _ = cc.Close() }()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return readAll(ctx, cc)
}

// newClient is a gRPC client on conn alone: a call never dials again, so
// a broken tunnel fails the read (and the caller falls back) instead of
// being retried with backoff.
func newClient(conn net.Conn) (*grpc.ClientConn, error) {
	var once sync.Once
	dialer := func(context.Context, string) (net.Conn, error) {
		var c net.Conn
		once.Do(func() { c = conn })
		if c == nil {
			return nil, errors.New("the tunnel to the GCS closed")
		}
		return c, nil
	}
	return grpc.NewClient("passthrough:///gcs",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer),
		grpc.WithNoProxy(),
		// Ray's own channels take replies up to 512 MiB
		// (python/ray/_private/gcs_utils.py L55-69); a large cluster's node
		// table outgrows gRPC's default of 4 MiB.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(512<<20), grpc.ForceCodec(RawCodec{})))
}

// The requests. All are empty except the job table's, which sets
// skip_submission_job_info_field (3) and skip_is_running_tasks_field (4)
// as Ray's own state reader does (python/ray/_private/state.py L191-193):
// without them the GCS asks every live driver for its pending tasks first.
// GetAllNodeInfoRequest is sent empty because its field numbers moved
// between Ray 2.46 and 2.49.
var jobsRequest = protowire.AppendVarint(protowire.AppendTag(
	protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 1), 4, protowire.VarintType), 1)

// clusterMetadataRequest asks for the cluster metadata the head's ray start
// records, which holds its Ray version: key CLUSTER_METADATA in namespace
// "cluster" (python/ray/_common/usage/usage_lib.py L401-417 and L521-543,
// Ray 2.52.1).
var clusterMetadataRequest = protowire.AppendBytes(protowire.AppendTag(
	protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("CLUSTER_METADATA")),
	2, protowire.BytesType), []byte("cluster"))

// readAll makes the four calls at once (one connection carries them all)
// and decodes their replies.
func readAll(ctx context.Context, cc *grpc.ClientConn) (Reading, error) {
	calls := []struct {
		method string
		req    []byte
		reply  []byte
		err    error
	}{{method: methodNodes}, {method: methodGroups}, {method: methodJobs, req: jobsRequest}, {method: methodKVGet, req: clusterMetadataRequest}}
	var wg sync.WaitGroup
	for i := range calls {
		c := &calls[i]
		wg.Go(func() {
			c.err = cc.Invoke(ctx, c.method, &c.req, &c.reply)
		})
	}
	wg.Wait()
	for _, c := range calls {
		if c.err != nil {
			return Reading{}, fmt.Errorf("GCS %s: %w", c.method, c.err)
		}
	}
	var r Reading
	var err error
	if r.Nodes, err = DecodeNodes(calls[0].reply); err != nil {
		return Reading{}, fmt.Errorf("GCS node table: %w", err)
	}
	// The version first: the placement groups' states are numbered per release.
	if r.RayVersion, err = rayVersion(calls[3].reply); err != nil {
		return Reading{}, err
	}
	if r.Groups, err = DecodePlacementGroups(calls[1].reply, r.RayVersion); err != nil {
		return Reading{}, fmt.Errorf("GCS placement groups: %w", err)
	}
	if r.Jobs, err = DecodeJobs(calls[2].reply); err != nil {
		return Reading{}, fmt.Errorf("GCS job table: %w", err)
	}
	return r, nil
}

// rayVersion reads ray_version out of the cluster metadata.
func rayVersion(reply []byte) (string, error) {
	raw, err := DecodeKV(reply)
	if err != nil {
		return "", fmt.Errorf("GCS cluster metadata: %w", err)
	}
	var md struct {
		RayVersion string `json:"ray_version"`
	}
	if err := json.Unmarshal(raw, &md); err != nil || md.RayVersion == "" {
		return "", fmt.Errorf("GCS cluster metadata holds no ray_version: %q", raw)
	}
	return md.RayVersion, nil
}

// RawCodec passes messages through as bytes: the requests are built and the
// replies decoded by field number here. Its name keeps the content type
// application/grpc+proto, which is what the GCS serves. The simulated
// nodes' GCS (internal/sim) serves with it too.
type RawCodec struct{}

func (RawCodec) Name() string { return "proto" }

func (RawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot send %T", v)
	}
	return *b, nil
}

func (RawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: cannot receive into %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

// Timeout bounds one reading: a GCS that answers takes milliseconds; one
// that does not is left to the Python fallback, which has its own bound.
const Timeout = 10 * time.Second
