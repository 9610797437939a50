package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// Defaults a careful operator would pick.
const (
	DefaultPort              = 22
	DefaultConnectTimeout    = 30 * time.Second
	DefaultKeepaliveInterval = 15 * time.Second
	DefaultKeepaliveTimeout  = 30 * time.Second
	DefaultMaxParallel       = 16
	// SessionsPerConn matches sshd's default MaxSessions.
	SessionsPerConn = 10
)

// Endpoint is a host the pool connects to.
type Endpoint struct {
	Host    string
	Port    int    // 0: the pool's default port
	User    string // "": the pool's default user
	HostKey string // authorized_keys-style line; pins the key, wins over known_hosts
}

// Config is the provider-wide SSH configuration.
type Config struct {
	User              string // default: the local user, like ssh
	Port              int
	PrivateKey        []byte // PEM; never logged
	PrivateKeyFile    string
	UseAgent          bool
	AgentSocket       string // default: $SSH_AUTH_SOCK
	KnownHostsFile    string
	Policy            HostKeyPolicy
	ConnectTimeout    time.Duration
	KeepaliveInterval time.Duration
	KeepaliveTimeout  time.Duration // no reply within this: the connection is dropped
	Bastion           *Endpoint
	MaxParallel       int // concurrent sessions across all connections
}

// Pool holds one SSH connection per (host, port, user) for a provider
// process, shared by every resource and data source.
type Pool struct {
	cfg        Config
	keySigners []ssh.Signer
	verify     *verifier
	parallel   chan struct{}

	mu    sync.Mutex
	conns map[string]*dialing
	// pairs: one TakeSlots at a time takes its slots, so two of them never
	// each hold one and wait for another.
	pairs sync.Mutex

	handshakes atomic.Int64
}

type dialing struct {
	done chan struct{}
	conn *Conn
	err  error
}

// NewPool validates cfg and loads credentials. It does not connect.
func NewPool(cfg Config) (*Pool, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	keySigners, err := loadKeys(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.AgentSocket == "" {
		cfg.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
	}
	if err := checkCredentials(cfg, keySigners); err != nil {
		return nil, err
	}
	p := &Pool{
		cfg:      cfg,
		verify:   &verifier{policy: cfg.Policy, knownHosts: cfg.KnownHostsFile},
		parallel: make(chan struct{}, cfg.MaxParallel),
		conns:    map[string]*dialing{},
	}
	p.keySigners = keySigners
	return p, nil
}

// withDefaults fills what cfg leaves unset as ssh would (the local user,
// port 22, ~/.ssh/known_hosts) or with the package defaults, and refuses an
// unknown host key policy.
func withDefaults(cfg Config) (Config, error) {
	if cfg.User == "" {
		u, err := user.Current()
		if err != nil {
			return Config{}, fmt.Errorf("no ssh user given and the local user is unknown: %w", err)
		}
		cfg.User = u.Username
	}
	cfg.Port = orDefault(cfg.Port, DefaultPort)
	cfg.ConnectTimeout = orDefault(cfg.ConnectTimeout, DefaultConnectTimeout)
	cfg.KeepaliveInterval = orDefault(cfg.KeepaliveInterval, DefaultKeepaliveInterval)
	cfg.KeepaliveTimeout = orDefault(cfg.KeepaliveTimeout, DefaultKeepaliveTimeout)
	cfg.MaxParallel = orDefault(cfg.MaxParallel, DefaultMaxParallel)
	if cfg.Policy == "" {
		cfg.Policy = PolicyStrict
	}
	switch cfg.Policy {
	case PolicyStrict, PolicyAcceptNew, PolicyInsecure:
	default:
		return Config{}, fmt.Errorf("host_key_policy %q: want strict, accept-new or insecure", cfg.Policy)
	}
	// Only the insecure policy reads no known_hosts file.
	if cfg.KnownHostsFile == "" && cfg.Policy != PolicyInsecure {
		home, err := os.UserHomeDir()
		if err != nil {
			return Config{}, fmt.Errorf("no known_hosts_file given and no home directory: %w", err)
		}
		cfg.KnownHostsFile = home + "/.ssh/known_hosts"
	}
	return cfg, nil
}

// orDefault is v, or def when v is zero or negative (unset).
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// loadKeys parses the keys cfg gives, private_key before private_key_file
// (the order they are offered in). Neither is required.
func loadKeys(cfg Config) ([]ssh.Signer, error) {
	var keySigners []ssh.Signer
	add := func(what string, pem []byte) error {
		s, err := parseKey(what, pem)
		if s != nil {
			keySigners = append(keySigners, s)
		}
		return err
	}
	if err := add("private_key", cfg.PrivateKey); err != nil {
		return nil, err
	}
	if cfg.PrivateKeyFile == "" {
		return keySigners, nil
	}
	what := "private_key_file " + cfg.PrivateKeyFile
	b, err := os.ReadFile(cfg.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if err := add(what, b); err != nil {
		return nil, err
	}
	return keySigners, nil
}

// parseKey parses one PEM key named what in errors; nil for an empty one.
// A passphrase-protected key is refused with the way out: the provider
// has nowhere to ask for a passphrase, ssh-agent does.
func parseKey(what string, pem []byte) (ssh.Signer, error) {
	if len(pem) == 0 {
		return nil, nil
	}
	s, err := ssh.ParsePrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("%s is encrypted with a passphrase: load it into ssh-agent and set use_agent = true instead", what)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", what, err)
	}
	return s, nil
}

// checkCredentials refuses a configuration that could never authenticate:
// an agent asked for but not found, or no agent and no key.
func checkCredentials(cfg Config, keySigners []ssh.Signer) error {
	if cfg.UseAgent && cfg.AgentSocket == "" {
		return errors.New("use_agent is true but SSH_AUTH_SOCK is not set: start ssh-agent or give private_key / private_key_file")
	}
	if !cfg.UseAgent && len(keySigners) == 0 {
		return errors.New("no SSH credentials: give private_key or private_key_file, or use_agent = true with a running ssh-agent")
	}
	return nil
}

// signers returns the keys to offer and a release for the agent connection,
// which must stay open until the handshake is over (the agent signs).
// Keys given explicitly go first, keeping under the server's MaxAuthTries.
func (p *Pool) signers() ([]ssh.Signer, func(), error) {
	if !p.cfg.UseAgent {
		return p.keySigners, func() {}, nil
	}
	c, err := net.Dial("unix", p.cfg.AgentSocket)
	if err != nil {
		if len(p.keySigners) > 0 {
			return p.keySigners, func() {}, nil
		}
		return nil, nil, fmt.Errorf("ssh-agent at %s: %w", p.cfg.AgentSocket, err)
	}
	as, err := agent.NewClient(c).Signers()
	if err != nil && len(p.keySigners) == 0 {
		c.Close()
		return nil, nil, fmt.Errorf("ssh-agent: %w", err)
	}
	return append(append([]ssh.Signer{}, p.keySigners...), as...), func() { c.Close() }, nil
}

// Handshakes counts SSH handshakes this pool completed (for measurements:
// a plan should need one per distinct host).
func (p *Pool) Handshakes() int64 { return p.handshakes.Load() }

func (p *Pool) normalize(e Endpoint) Endpoint {
	if e.Port == 0 {
		e.Port = p.cfg.Port
	}
	if e.User == "" {
		e.User = p.cfg.User
	}
	return e
}

func (e Endpoint) addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// Get returns the shared connection to e, dialing it once. Concurrent
// callers for the same endpoint wait for the same dial.
func (p *Pool) Get(ctx context.Context, e Endpoint) (*Conn, error) {
	e = p.normalize(e)
	var pinned ssh.PublicKey
	if e.HostKey != "" {
		k, err := ParseHostKey(e.HostKey)
		if err != nil {
			return nil, &Error{Host: e.addr(), Step: "parse host_key", ExitStatus: -1, Err: err}
		}
		pinned = k
	}
	key := e.User + "@" + e.addr()
	for {
		p.mu.Lock()
		d, ok := p.conns[key]
		if !ok {
			d = &dialing{done: make(chan struct{})}
			p.conns[key] = d
			p.mu.Unlock()
			d.conn, d.err = p.dial(ctx, e, pinned)
			if d.err != nil {
				p.forget(key, d)
			} else {
				d.conn.setOnClose(func() { p.forget(key, d) })
				go d.conn.keepalive(p.cfg.KeepaliveInterval, p.cfg.KeepaliveTimeout)
			}
			close(d.done)
			return d.conn, d.err
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, &Error{Host: e.addr(), Step: "connect", ExitStatus: -1, Err: ctx.Err()}
		case <-d.done:
		}
		if d.err != nil {
			return nil, d.err
		}
		if d.conn.isClosed() {
			// Dropped since (keepalive lost): dial afresh. Forgotten here
			// too, in case it closed before its onClose was set.
			p.forget(key, d)
			continue
		}
		// A connection made for another resource: the pin still applies.
		if pinned != nil && string(pinned.Marshal()) != string(d.conn.hostKey.Marshal()) {
			return nil, &Error{Host: e.addr(), Step: "verify host key", ExitStatus: -1, Err: &HostKeyError{
				Host: e.addr(), Problem: HostKeyNotPin, KeyType: d.conn.hostKey.Type(),
				Fingerprint: ssh.FingerprintSHA256(d.conn.hostKey), Expected: []string{pinned.Type() + " " + ssh.FingerprintSHA256(pinned)}}}
		}
		return d.conn, nil
	}
}

// Run runs cmd on the shared connection to e. A connection found gone when
// the command was to start (ErrConnectionLost: nothing of it ran) is
// replaced by a fresh one and the command sent once more, so that what
// follows a dropped connection (an apply's rollback after its sessions were
// killed) reaches the node instead of failing on the dead connection.
func (p *Pool) Run(ctx context.Context, e Endpoint, cmd Cmd) (*Result, error) {
	return onFreshIfLost(ctx, p, e, func(c *Conn) (*Result, error) { return c.Run(ctx, cmd) })
}

// onFreshIfLost runs f on the connection to e, and once more on a fresh one
// when f found the first gone before anything started (ErrConnectionLost).
func onFreshIfLost[T any](ctx context.Context, p *Pool, e Endpoint, f func(*Conn) (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		c, err := p.Get(ctx, e)
		if err != nil {
			var zero T
			return zero, err
		}
		v, err := f(c)
		if attempt == 0 && errors.Is(err, ErrConnectionLost) {
			continue
		}
		return v, err
	}
}

// Node is one node as the pool reaches it: each command takes the pool's
// connection to it as it is at that moment, so that a command after a
// dropped connection goes out on a fresh one. For work that spans many
// commands (a vLLM launch and its rollback) where a *Conn would stay bound
// to a connection that may die on the way.
type Node struct {
	Pool     *Pool
	Endpoint Endpoint
}

// Addr is the node's host:port, as errors name it.
func (n Node) Addr() string { return n.Pool.normalize(n.Endpoint).addr() }

// Run is Pool.Run on the node.
func (n Node) Run(ctx context.Context, cmd Cmd) (*Result, error) {
	return n.Pool.Run(ctx, n.Endpoint, cmd)
}

// Hold is Conn.Hold on the node's connection, sent once more on a fresh
// one when that connection was found gone before the command started.
func (n Node) Hold(ctx context.Context, cmd Cmd, ready string) (*Held, error) {
	return onFreshIfLost(ctx, n.Pool, n.Endpoint, func(c *Conn) (*Held, error) { return c.Hold(ctx, cmd, ready) })
}

// DialContext is Conn.DialContext on the node's connection.
func (n Node) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := n.Pool.Get(ctx, n.Endpoint)
	if err != nil {
		return nil, err
	}
	return c.DialContext(ctx, network, addr)
}

func (p *Pool) forget(key string, d *dialing) {
	p.mu.Lock()
	if p.conns[key] == d {
		delete(p.conns, key)
	}
	p.mu.Unlock()
}

// Close closes every connection.
func (p *Pool) Close() {
	p.mu.Lock()
	var all []*dialing
	for _, d := range p.conns {
		all = append(all, d)
	}
	p.mu.Unlock()
	for _, d := range all {
		<-d.done
		if d.conn != nil {
			d.conn.Close()
		}
	}
}

func (p *Pool) clientConfig(e Endpoint, pinned ssh.PublicKey, seen *ssh.PublicKey, signers []ssh.Signer) (*ssh.ClientConfig, error) {
	cb, algos, err := p.verify.check(e.addr(), pinned, seen)
	if err != nil {
		return nil, err
	}
	return &ssh.ClientConfig{
		User:              e.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signers...)},
		HostKeyCallback:   cb,
		HostKeyAlgorithms: algos,
		Timeout:           p.cfg.ConnectTimeout,
	}, nil
}

// dial connects to e, through the bastion when one is configured. The TCP
// dial and the SSH handshake are both bounded by ctx and ConnectTimeout, so
// a silent server never hangs a plan.
func (p *Pool) dial(ctx context.Context, e Endpoint, pinned ssh.PublicKey) (c *Conn, err error) {
	defer logConnect(ctx, e, p.cfg.Bastion != nil, time.Now(), &c, &err)
	return p.connect(ctx, e, pinned)
}

func (p *Pool) connect(ctx context.Context, e Endpoint, pinned ssh.PublicKey) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	defer cancel()
	fail := func(step string, err error) (*Conn, error) {
		var hk *HostKeyError
		if errors.As(err, &hk) {
			err = hk // drop "ssh: handshake failed:" noise around it
		}
		if ctx.Err() != nil && !errors.As(err, &hk) {
			err = fmt.Errorf("%w (connect_timeout %s)", ctx.Err(), p.cfg.ConnectTimeout)
		}
		return nil, &Error{Host: e.addr(), Step: step, ExitStatus: -1, Err: err}
	}
	var raw net.Conn
	var err error
	if b := p.cfg.Bastion; b != nil && p.normalize(*b).addr() != e.addr() {
		jump, jerr := p.Get(ctx, *b)
		if jerr != nil {
			return fail("connect through bastion "+b.Host, jerr)
		}
		raw, err = jump.client.DialContext(ctx, "tcp", e.addr())
		if err != nil {
			return fail(tunnelStep+b.Host, err)
		}
	} else {
		d := net.Dialer{KeepAlive: p.cfg.KeepaliveInterval}
		raw, err = d.DialContext(ctx, "tcp", e.addr())
		if err != nil {
			return fail("connect", err)
		}
	}
	// The handshake has no context of its own: closing the connection when
	// ctx ends (deadline or cancel) unblocks it.
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	signers, release, err := p.signers()
	if err != nil {
		stop()
		raw.Close()
		return fail("load credentials", err)
	}
	defer release()
	var seen ssh.PublicKey
	cfg, err := p.clientConfig(e, pinned, &seen, signers)
	if err != nil {
		stop()
		raw.Close()
		return fail("load host keys", err)
	}
	cc, chans, reqs, err := ssh.NewClientConn(raw, e.addr(), cfg)
	if !stop() || err != nil {
		raw.Close()
		if err == nil {
			err = ctx.Err()
		}
		return fail("handshake", err)
	}
	p.handshakes.Add(1)
	return newConn(p, e.addr(), ssh.NewClient(cc, chans, reqs), seen), nil
}

// slotsKey marks a context whose commands run in slots TakeSlots took.
type slotsKey struct{}

// TakeSlots takes n of the max_parallel slots at once (fewer when the pool
// has fewer: max_parallel = 1 gives 1) for commands that only work side by
// side, such as the two ends of a model copy: taken one by one, each end
// could hold a slot while the other waits for one that never frees (with
// max_parallel = 1 every copy did). Commands run with the returned context
// use these slots, not slots of their own; release gives them back.
func (p *Pool) TakeSlots(ctx context.Context, n int) (context.Context, func(), error) {
	n = min(n, cap(p.parallel))
	p.pairs.Lock()
	defer p.pairs.Unlock()
	taken := 0
	release := func() {
		for range taken {
			<-p.parallel
		}
	}
	for taken < n {
		select {
		case p.parallel <- struct{}{}:
			taken++
		case <-ctx.Done():
			release()
			return nil, nil, context.Cause(ctx)
		}
	}
	return context.WithValue(ctx, slotsKey{}, p), release, nil
}
