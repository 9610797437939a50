package sim

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// What every simulated node has installed, as the lab's nodes do.
const (
	RayVersion    = "2.52.1"
	PythonVersion = "3.11.2"
)

// The fabric every node is on: one /16, 10.20.0.0/16, the default route
// through its gateway (10.20.255.254), so a worker reaches the head
// directly (rule D5 is satisfied) and Ray's own address detection picks
// the fabric address.
const (
	fabricIf     = "enP7s7"
	fabricPrefix = 16
	gpusPerNode  = 1
	cpusPerNode  = 20
)

// Node is what one simulated machine is: fixed for the run, unless a test
// varies it (vary.go).
type Node struct {
	Hostname   string
	IP         netip.Addr // its fabric address
	GPUs       int
	RayVersion string // "": Ray is not installed
	// VLLMVersion is vLLM's in Ray's Python ("": not installed).
	VLLMVersion string

	held map[int]string // port -> the program of the SSH user's that listens there
	// firewalled: the node's connections to other nodes are dropped
	// (CutOff), while its addresses stay as they were.
	firewalled bool
	// registersAs: the address the node's raylet registers, whatever it is
	// told (RegisterAs).
	registersAs netip.Addr
}

// raylet is Ray running on a node: what `ray start` registered.
type raylet struct {
	id        string
	head      bool
	dead      bool   // head only: its raylet died, its GCS still answers
	gcsAddr   string // the GCS it belongs to (the head's ip:port)
	gcsPort   int    // head only: the port its GCS listens on
	ip        string // registered address (NodeManagerAddress)
	gpus      float64
	resources map[string]float64 // custom, from --resources
	labels    map[string]string  // custom, from --labels
	started   time.Time          // when its ray start took effect (the GCS listens, for a head)
	registers time.Time          // when the GCS's node table lists it (zero: at once)
}

// Model is the cluster the nodes simulate: what each node is, and what the
// commands that change something (ray start, the stop script, the token
// and the start marker) left on it. Nothing runs: a raylet is a record.
type Model struct {
	mu      sync.Mutex
	nodes   []Node              // what a test varies (SetRayVersion, MoveNode, HoldPort) changes it
	rays    []*raylet           // by node index; nil: no Ray there
	dead    []deadNode          // nodes whose raylet died, as their GCS keeps them
	removed []removedGroup      // placement groups of servers that ended, as their GCS keeps them (REMOVED)
	markers []map[string]string // by node index: GCS port -> start marker's holder line
	tokens  []string            // by node index: ~/.ray/auth_token
	locked  []bool              // by node index: the node lock is held
	current []string            // by node index: <temp>/ray/ray_current_cluster ("" none)

	vllms       [][]*vllmServer     // by node index: the vllm serve running there
	files       []map[string]string // by node index: path -> content, of the files the provider writes and reads
	launchLocks []map[string]bool   // by node index: deployment directory -> its launch lock is held
	nextPID     int

	// otherGCSLayout: the GCS's gRPC replies are laid out as another Ray
	// release's might be (OtherGCSLayout).
	otherGCSLayout bool
	// headStart: how a head's ray start spreads in time (SlowHeadStart);
	// zero, at once.
	headStart HeadStart
}

// HeadStart is how a head's `ray start` spreads in time, each phase from
// the moment the command arrives, as Ray 2.52.1's does (node.py): its GCS
// listens (start_gcs_server), then, after the monitor and the dashboard,
// its raylet registers, then the command returns.
type HeadStart struct {
	GCSListens, Registers, Returns time.Duration
}

// SlowHeadStart makes every head's ray start take its time as h says.
func (m *Model) SlowHeadStart(h HeadStart) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.headStart = h
}

// StartTimes are when Ray's start took effect on node i (the GCS listens,
// on a head) and when the GCS's node table listed it; zero times where no
// Ray runs.
func (m *Model) StartTimes(i int) (started, registered time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rays[i]; r != nil {
		registered = r.registers
		if registered.IsZero() {
			registered = r.started
		}
		return r.started, registered
	}
	return time.Time{}, time.Time{}
}

// deadNode is a raylet that died: its GCS lists it, not alive.
type deadNode struct {
	gcsAddr string
	row     tableRow
}

// NewModel is a cluster of n nodes with nothing running: node 0 is meant
// to be the head, the others workers.
func NewModel(n int) *Model {
	m := &Model{nodes: make([]Node, n), rays: make([]*raylet, n), markers: make([]map[string]string, n),
		tokens: make([]string, n), locked: make([]bool, n), current: make([]string, n),
		vllms: make([][]*vllmServer, n), files: make([]map[string]string, n), launchLocks: make([]map[string]bool, n), nextPID: 4100}
	for i := range m.nodes {
		m.nodes[i] = Node{Hostname: fmt.Sprintf("spark-%03d", i), IP: fabricAddr(i), GPUs: gpusPerNode,
			RayVersion: RayVersion, VLLMVersion: VLLMVersion, held: map[int]string{}}
		m.markers[i] = map[string]string{}
		m.files[i] = map[string]string{}
		m.launchLocks[i] = map[string]bool{}
	}
	return m
}

// node is node i as it is now.
func (m *Model) node(i int) Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodes[i]
}

// fabricAddr is node i's address: 10.20.0.1 onwards.
func fabricAddr(i int) netip.Addr {
	k := i + 1
	return netip.AddrFrom4([4]byte{10, 20, byte(k >> 8), byte(k)})
}

// network is the network the address ip is on: its /16.
func network(ip netip.Addr) netip.Prefix {
	return netip.PrefixFrom(ip, fabricPrefix).Masked()
}

// gateway is the router of the network ip is on: its x.y.255.254.
func gateway(ip netip.Addr) string {
	a := ip.As4()
	return netip.AddrFrom4([4]byte{a[0], a[1], 255, 254}).String()
}

// newNodeID is a fresh Ray node ID: 28 random bytes in hex, as Ray's.
func newNodeID() string {
	b := make([]byte, 28)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// headOf is the head raylet serving gcsAddr, if its GCS runs (its raylet
// may have died); the caller holds mu.
func (m *Model) headOf(gcsAddr string) *raylet {
	for _, r := range m.rays {
		if r != nil && r.head && r.gcsAddr == gcsAddr {
			return r
		}
	}
	return nil
}

// gcsUp reports whether a GCS answers at addr.
func (m *Model) gcsUp(addr string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.headOf(addr) != nil
}
