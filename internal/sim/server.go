package sim

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lab-infra/terraform-provider-spark/internal/transport/sshtest"
	"golang.org/x/crypto/ssh"
)

// Options say what to simulate.
type Options struct {
	Nodes int
	// RTT is the round-trip time between the provider and every node.
	RTT time.Duration
	// Exec is how long every command takes on the node before it answers
	// (0: at once). A real node spends tens to hundreds of milliseconds in
	// the facts script (a Python start) and the node table read.
	Exec time.Duration
	// ClientKey is the one key the nodes let in, as an authorized_keys line.
	ClientKey string
	// OnePort has every node listen on the same port (each on its own
	// address), as real nodes' sshd all do on 22: the provider's ssh.port
	// then reaches every node, as after an import, whose state has no
	// ssh_port. Otherwise each node gets a port of its own.
	OnePort bool
}

// Endpoint is where the provider reaches one simulated node.
type Endpoint struct {
	Host    string `json:"host"`
	Port    int    `json:"port"`
	HostKey string `json:"host_key"` // authorized_keys-style line
}

// Stats is what the nodes saw, for the bench to report.
type Stats struct {
	Handshakes   int64              `json:"handshakes"`     // SSH handshakes completed
	OpenConns    int64              `json:"open_conns"`     // connections open now
	MaxOpenConns int64              `json:"max_open_conns"` // most open at once
	Sessions     int64              `json:"sessions"`       // exec sessions served
	Commands     map[string]Command `json:"commands"`       // by route name
	Unknown      []string           `json:"unknown"`        // the first unknown commands (first line)
	UnknownCount int64              `json:"unknown_count"`
	CPU          time.Duration      `json:"cpu"` // of the process serving the nodes (a child's, when the nodes run in one)
}

// Command is what the nodes saw of one kind of command: how many ran, and
// when the first and the last of them started (since the nodes started,
// or were last reset): commands the provider sends one after another start
// over a long span, commands it sends at once over a short one.
type Command struct {
	Count      int64         `json:"count"`
	FirstStart time.Duration `json:"first_start"`
	LastStart  time.Duration `json:"last_start"`
}

// Span is the time from the first one's start to the last one's start.
func (c Command) Span() time.Duration { return c.LastStart - c.FirstStart }

// counters are Stats as the servers update them.
type counters struct {
	handshakes, open, maxOpen, sessions, unknownCount atomic.Int64

	started  time.Time
	mu       sync.Mutex
	commands map[string]Command
	unknown  []string
}

func (c *counters) opened() {
	n := c.open.Add(1)
	for m := c.maxOpen.Load(); n > m && !c.maxOpen.CompareAndSwap(m, n); m = c.maxOpen.Load() {
	}
}

// ran counts one command, which started at start.
func (c *counters) ran(route, line string, start time.Time) {
	c.sessions.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if route != "" {
		cmd, seen := c.commands[route]
		at := start.Sub(c.started)
		if !seen || at < cmd.FirstStart {
			cmd.FirstStart = at
		}
		cmd.Count, cmd.LastStart = cmd.Count+1, max(cmd.LastStart, at)
		c.commands[route] = cmd
		return
	}
	c.unknownCount.Add(1)
	if len(c.unknown) < 5 {
		c.unknown = append(c.unknown, firstLine(line))
	}
}

func (c *counters) stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmds := make(map[string]Command, len(c.commands))
	for k, v := range c.commands {
		cmds[k] = v
	}
	return Stats{Handshakes: c.handshakes.Load(), OpenConns: c.open.Load(), MaxOpenConns: c.maxOpen.Load(),
		Sessions: c.sessions.Load(), Commands: cmds, Unknown: append([]string(nil), c.unknown...),
		UnknownCount: c.unknownCount.Load()}
}

// Fleet is the simulated nodes, serving in this process: node 0 is the
// head, each node an SSH server on its own loopback address.
type Fleet struct {
	Model     *Model
	endpoints []Endpoint
	listeners []net.Listener
	counters  *counters
}

// Start starts o.Nodes simulated nodes on 127.1.0.1, 127.1.0.2, …
// (distinct addresses, as distinct machines have; all of 127/8 is local
// on Linux), each with a fresh ed25519 host key and a port of its own.
func Start(o Options) (*Fleet, error) {
	client, _, _, _, err := ssh.ParseAuthorizedKey([]byte(o.ClientKey))
	if err != nil {
		return nil, fmt.Errorf("client key: %w", err)
	}
	// With OnePort, the port the first node got may be taken on another
	// address: a few tries with a new one.
	for try := 1; ; try++ {
		f := &Fleet{Model: NewModel(o.Nodes), counters: &counters{started: time.Now(), commands: map[string]Command{}}}
		err := f.listenAll(client, o)
		if err == nil {
			return f, nil
		}
		f.Close()
		if !o.OnePort || try == 5 {
			return nil, err
		}
	}
}

// listenAll starts every node's server.
func (f *Fleet) listenAll(client ssh.PublicKey, o Options) error {
	port := "0"
	for i := range o.Nodes {
		if err := f.listen(i, client, o, port); err != nil {
			return err
		}
		if o.OnePort {
			port = strconv.Itoa(f.endpoints[0].Port)
		}
	}
	return nil
}

// listen starts node i's server on port ("0": any).
func (f *Fleet) listen(i int, client ssh.PublicKey, o Options, port string) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	hostKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(loopbackAddr(i).String(), port))
	if err != nil {
		return fmt.Errorf("simulated node %d: %w", i, err)
	}
	f.listeners = append(f.listeners, ln)
	ap := netip.MustParseAddrPort(ln.Addr().String())
	f.endpoints = append(f.endpoints, Endpoint{Host: ap.Addr().String(), Port: int(ap.Port()),
		HostKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostKey.PublicKey())))})
	n := &nodeServer{index: i, fleet: f, rtt: o.RTT, exec: o.Exec, config: serverConfig(hostKey, client)}
	go n.serve(ln)
	return nil
}

// loopbackAddr is node i's address: 127.1.0.1 onwards.
func loopbackAddr(i int) netip.Addr {
	k := i + 1
	return netip.AddrFrom4([4]byte{127, 1, byte(k >> 8), byte(k)})
}

func serverConfig(hostKey ssh.Signer, client ssh.PublicKey) *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == string(client.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("sim: client key not accepted")
		},
	}
	cfg.AddHostKey(hostKey)
	return cfg
}

// ResetCommands forgets the commands seen so far (not the connections):
// what Stats reports next is one run's.
func (f *Fleet) ResetCommands() {
	c := f.counters
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started, c.commands, c.unknown = time.Now(), map[string]Command{}, nil
	c.sessions.Store(0)
	c.unknownCount.Store(0)
}

// Endpoints are the nodes' addresses and host keys, the head's first.
func (f *Fleet) Endpoints() []Endpoint { return append([]Endpoint(nil), f.endpoints...) }

// Stats is what the nodes saw so far.
func (f *Fleet) Stats() Stats { return f.counters.stats() }

// Close stops listening; connections already open end with their client.
func (f *Fleet) Close() {
	for _, ln := range f.listeners {
		_ = ln.Close()
	}
}

// nodeServer is one simulated node's SSH server.
type nodeServer struct {
	index  int
	fleet  *Fleet
	rtt    time.Duration
	exec   time.Duration
	config *ssh.ServerConfig
}

func (n *nodeServer) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go n.handle(withRTT(c, n.rtt))
	}
}

func (n *nodeServer) handle(c net.Conn) {
	sc, chans, reqs, err := ssh.NewServerConn(c, n.config)
	if err != nil {
		_ = c.Close()
		return
	}
	cnt := n.fleet.counters
	cnt.handshakes.Add(1)
	cnt.opened()
	defer cnt.open.Add(-1)
	defer func() { _ = sc.Close() }()
	go refuseGlobal(reqs)
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			go n.session(nc)
		case "direct-tcpip":
			go n.tunnel(nc)
		default:
			_ = nc.Reject(ssh.UnknownChannelType, "the simulated node opens sessions and tunnels only")
		}
	}
}

// tunnel answers a direct-tcpip channel (the provider's DialContext, to
// reach vLLM's port or the GCS's from the node itself) as sshd does:
// connected to what listens at the address on the node, refused when
// nothing does.
func (n *nodeServer) tunnel(nc ssh.NewChannel) {
	var to struct {
		Host     string
		Port     uint32
		FromHost string
		FromPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &to); err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	m := n.fleet.Model
	v := m.dialVLLM(n.index, to.Host, int(to.Port))
	if addr := net.JoinHostPort(to.Host, strconv.Itoa(int(to.Port))); v == nil && m.gcsUp(addr) {
		ch, reqs, err := nc.Accept()
		if err != nil {
			return
		}
		go ssh.DiscardRequests(reqs)
		m.serveGCS(n.index, addr, ch)
		return
	}
	if v == nil {
		_ = nc.Reject(ssh.ConnectionFailed, "Connection refused")
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	m.serveHTTP(v, ch)
}

// refuseGlobal answers global requests (keepalives) as sshd does: no.
func refuseGlobal(reqs <-chan *ssh.Request) {
	for r := range reqs {
		if r.WantReply {
			_ = r.Reply(false, nil)
		}
	}
}

// session answers the first exec request of a session from the model,
// after the node's exec delay, and counts it (sshtest.ServeExec).
func (n *nodeServer) session(nc ssh.NewChannel) {
	sshtest.ServeExec(nc, func(ch ssh.Channel, command string) uint32 {
		start := time.Now()
		time.Sleep(n.exec)
		status, route := n.fleet.Model.answer(n.index, command, stdio{in: ch, out: ch, err: ch.Stderr()})
		n.fleet.counters.ran(route, command, start)
		return status
	})
}

// String is host:port, as known_hosts and messages name the node.
func (e Endpoint) String() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }
