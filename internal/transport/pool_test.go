package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/lab-infra/terraform-provider-spark/internal/transport/sshtest"
)

// fixture is a client key, a server that accepts it, and a pool config.
type fixture struct {
	client sshtest.Key
	srv    *sshtest.Server
	known  string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	client := sshtest.NewKey(t)
	return &fixture{client: client, srv: sshtest.New(t, client.Signer.PublicKey()),
		known: filepath.Join(t.TempDir(), "known_hosts")}
}

// endpointOf is how a node configured for s would look to the pool.
func endpointOf(s *sshtest.Server) Endpoint {
	return Endpoint{Host: s.Host(), Port: s.Port(), User: "ops"}
}

// keyLine is k as a host_key attribute holds it.
func keyLine(k ssh.PublicKey) string { return string(ssh.MarshalAuthorizedKey(k)) }

// trust adds s's current host key to known_hosts, as ssh-keyscan would.
func (f *fixture) trust(t *testing.T, s *sshtest.Server) {
	t.Helper()
	f.knownHostsLine(t, knownhosts.Line([]string{s.Addr()}, s.HostKey().PublicKey()))
}

// knownHostsLine appends one line to known_hosts.
func (f *fixture) knownHostsLine(t *testing.T, line string) {
	t.Helper()
	fh, err := os.OpenFile(f.known, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fmt.Fprintln(fh, line); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) pool(t *testing.T, mut func(*Config)) *Pool {
	t.Helper()
	cfg := Config{
		User:           "ops",
		PrivateKey:     f.client.PEM,
		KnownHostsFile: f.known,
		Policy:         PolicyStrict,
		ConnectTimeout: 5 * time.Second,
	}
	if mut != nil {
		mut(&cfg)
	}
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// connected is a pool that trusts the fixture's server (mut edits its
// config when not nil), the server's endpoint, and the pool's connection to it.
func (f *fixture) connected(t *testing.T, mut func(*Config)) (*Pool, Endpoint, *Conn) {
	t.Helper()
	f.trust(t, f.srv)
	p := f.pool(t, mut)
	e := endpointOf(f.srv)
	c, err := p.Get(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	return p, e, c
}

func hostKeyErr(t *testing.T, err error) *HostKeyError {
	t.Helper()
	var hk *HostKeyError
	if !errors.As(err, &hk) {
		t.Fatalf("want a host key error, got %v", err)
	}
	return hk
}

func run(t *testing.T, c *Conn, argv ...string) string {
	t.Helper()
	res, err := c.Run(context.Background(), Cmd{Step: "test", Argv: argv})
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Stdout)
}

func TestStrictRefusesUnknownHost(t *testing.T) {
	f := newFixture(t)
	_, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	hk := hostKeyErr(t, err)
	if hk.Problem != HostKeyUnknown {
		t.Fatalf("problem = %s, want unknown", hk.Problem)
	}
	fp := ssh.FingerprintSHA256(f.srv.HostKey().PublicKey())
	for _, want := range []string{endpointOf(f.srv).addr(), "ssh-ed25519", fp, "accept-new", "ssh-keyscan"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
}

func TestStrictAcceptsKnownHostAndRefusesChangedKey(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	c, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, c, "echo", "hi"); got != "hi\n" {
		t.Fatalf("echo = %q", got)
	}
	// The same address now presents another key: a reinstalled node, or worse.
	f.srv.SetHostKeys(sshtest.NewKey(t).Signer)
	_, err = f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if hk := hostKeyErr(t, err); hk.Problem != HostKeyChanged {
		t.Fatalf("problem = %s, want changed", hk.Problem)
	}
	if !strings.Contains(err.Error(), "CHANGED") || !strings.Contains(err.Error(), "ssh-keygen -R") {
		t.Fatalf("changed-key error lacks the fix: %v", err)
	}
}

func TestAcceptNewRecordsThenRefusesChange(t *testing.T) {
	f := newFixture(t)
	acceptNew := func(c *Config) { c.Policy = PolicyAcceptNew }
	if _, err := f.pool(t, acceptNew).Get(context.Background(), endpointOf(f.srv)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.known)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), strings.TrimSpace(strings.SplitN(keyLine(f.srv.HostKey().PublicKey()), " ", 2)[1])) {
		t.Fatalf("known_hosts does not hold the new key:\n%s", b)
	}
	if fi, _ := os.Stat(f.known); fi.Mode().Perm() != 0o600 {
		t.Fatalf("known_hosts mode = %v, want 0600", fi.Mode().Perm())
	}
	// Strict now accepts it: the key was recorded, not merely allowed.
	if _, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv)); err != nil {
		t.Fatal(err)
	}
	f.srv.SetHostKeys(sshtest.NewKey(t).Signer)
	_, err = f.pool(t, acceptNew).Get(context.Background(), endpointOf(f.srv))
	if hk := hostKeyErr(t, err); hk.Problem != HostKeyChanged {
		t.Fatalf("problem = %s, want changed", hk.Problem)
	}
}

func TestInsecureChecksNothing(t *testing.T) {
	f := newFixture(t)
	p := f.pool(t, func(c *Config) { c.Policy = PolicyInsecure; c.KnownHostsFile = "" })
	c, err := p.Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	if c.HostKeyFingerprint() != ssh.FingerprintSHA256(f.srv.HostKey().PublicKey()) {
		t.Fatal("fingerprint of the presented key not recorded")
	}
}

func TestPinnedKeyWinsOverKnownHosts(t *testing.T) {
	f := newFixture(t)
	// known_hosts is empty (strict would refuse), the pin is right: accepted.
	e := endpointOf(f.srv)
	e.HostKey = keyLine(f.srv.HostKey().PublicKey())
	if _, err := f.pool(t, nil).Get(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	// A wrong pin is refused even though known_hosts trusts the host.
	f.trust(t, f.srv)
	e.HostKey = string(ssh.MarshalAuthorizedKey(sshtest.NewKey(t).Signer.PublicKey()))
	_, err := f.pool(t, nil).Get(context.Background(), e)
	if hk := hostKeyErr(t, err); hk.Problem != HostKeyNotPin {
		t.Fatalf("problem = %s, want pin mismatch", hk.Problem)
	}
	if !strings.Contains(err.Error(), "pinned host_key") {
		t.Fatalf("error does not say the pin is wrong: %v", err)
	}
}

func TestPinAppliesToSharedConnection(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	p := f.pool(t, nil)
	if _, err := p.Get(context.Background(), endpointOf(f.srv)); err != nil {
		t.Fatal(err)
	}
	e := endpointOf(f.srv)
	e.HostKey = string(ssh.MarshalAuthorizedKey(sshtest.NewKey(t).Signer.PublicKey()))
	if _, err := p.Get(context.Background(), e); err == nil {
		t.Fatal("a wrong pin was accepted because a connection already existed")
	}
}

func TestMalformedPinNamesTheAttribute(t *testing.T) {
	f := newFixture(t)
	e := endpointOf(f.srv)
	e.HostKey = "not a key"
	_, err := f.pool(t, nil).Get(context.Background(), e)
	if err == nil || !strings.Contains(err.Error(), "host_key") {
		t.Fatalf("want an error naming host_key, got %v", err)
	}
}

func TestAgentAuth(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: f.client.Private}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = agent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	p := f.pool(t, func(c *Config) { c.PrivateKey = nil; c.UseAgent = true; c.AgentSocket = sock })
	c, err := p.Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, c, "echo", "agent"); got != "agent\n" {
		t.Fatalf("got %q", got)
	}
}

func TestBastion(t *testing.T) {
	f := newFixture(t)
	jump := sshtest.New(t, f.client.Signer.PublicKey())
	f.trust(t, f.srv)
	f.trust(t, jump)
	je := endpointOf(jump)
	p := f.pool(t, func(c *Config) { c.Bastion = &je })
	c, err := p.Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, c, "echo", "through"); got != "through\n" {
		t.Fatalf("got %q", got)
	}
	if jump.Tunnels() != 1 {
		t.Fatalf("bastion opened %d tunnels, want 1", jump.Tunnels())
	}
	if p.Handshakes() != 2 {
		t.Fatalf("handshakes = %d, want 2 (bastion + target)", p.Handshakes())
	}
}

func TestBastionHostKeyIsVerified(t *testing.T) {
	f := newFixture(t)
	jump := sshtest.New(t, f.client.Signer.PublicKey())
	f.trust(t, f.srv) // the target is known, the bastion is not
	je := endpointOf(jump)
	_, err := f.pool(t, func(c *Config) { c.Bastion = &je }).Get(context.Background(), endpointOf(f.srv))
	if hk := hostKeyErr(t, err); hk.Host != je.addr() {
		t.Fatalf("refused host = %s, want the bastion %s", hk.Host, je.addr())
	}
}

func TestHandshakeTimeout(t *testing.T) {
	// A server that accepts TCP and then says nothing.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	f := newFixture(t)
	p := f.pool(t, func(c *Config) { c.ConnectTimeout = 300 * time.Millisecond })
	port := ln.Addr().(*net.TCPAddr).Port
	done := make(chan error, 1)
	go func() {
		_, err := p.Get(context.Background(), Endpoint{Host: "127.0.0.1", Port: port})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "handshake") || !strings.Contains(err.Error(), "connect_timeout") {
			t.Fatalf("want a handshake timeout naming connect_timeout, got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a silent server hung the dial")
	}
}

func TestKeepaliveLossDropsConnectionAndRedials(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	p := f.pool(t, func(c *Config) {
		c.KeepaliveInterval = 50 * time.Millisecond
		c.KeepaliveTimeout = 200 * time.Millisecond
	})
	c, err := p.Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	f.srv.SetSilentKeepalive(true)
	select {
	case <-c.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("connection kept after keepalives went unanswered")
	}
	f.srv.SetSilentKeepalive(false)
	c2, err := p.Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	if c2 == c || p.Handshakes() != 2 {
		t.Fatalf("want a fresh connection after the loss (handshakes %d)", p.Handshakes())
	}
}

// A connection that drops before the pool has set what its close does is
// still forgotten: the next Get dials afresh at once (it used to find the
// closed connection again and again until its deadline).
func TestConnectionClosedBeforeOnCloseIsForgotten(t *testing.T) {
	f := newFixture(t)
	p, _, c := f.connected(t, nil)
	c.onClose.Store(nil) // as if it closed before Get set it
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	c2, err := p.Get(ctx, endpointOf(f.srv))
	if err != nil || c2 == c {
		t.Fatalf("Get after an early drop: %v (same connection: %v)", err, c2 == c)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("Get took %s: it spun on the closed connection", waited)
	}
}

// A connection found gone as a command is to start on it (its sshd killed
// a moment ago, before the goroutine watching it noticed): nothing of the
// command ran, so Pool.Run (and a Node's Run and Hold) send it again on a
// fresh connection, and the dead one is not handed out again. An apply's
// rollback after its sessions were killed used to fail this way at once,
// leaving the unfinished ray start to start Ray behind it.
func TestCommandsRedialAConnectionFoundGone(t *testing.T) {
	send := map[string]func(p *Pool, e Endpoint) error{
		"Pool.Run": func(p *Pool, e Endpoint) error {
			res, err := p.Run(context.Background(), e, Cmd{Step: "test", Argv: []string{"echo", "ran"}})
			if err == nil && strings.TrimSpace(string(res.Stdout)) != "ran" {
				err = fmt.Errorf("stdout %q", res.Stdout)
			}
			return err
		},
		"Node.Hold": func(p *Pool, e Endpoint) error {
			h, err := Node{Pool: p, Endpoint: e}.Hold(context.Background(), Cmd{Step: "lock", Argv: Script(`echo ready; cat >/dev/null`)}, "ready")
			if err == nil {
				h.Release()
			}
			return err
		},
	}
	for name, send := range send {
		t.Run(name, func(t *testing.T) {
			p, e, c := newFixture(t).connected(t, nil)
			ctx := context.Background()
			dead, err := p.dial(ctx, p.normalize(e), nil)
			if err != nil {
				t.Fatal(err)
			}
			dead.Close()
			live := c.client
			t.Cleanup(func() { _ = live.Close() })
			c.client = dead.client // c's watcher still sees the live client: the moment before it notices
			if err := send(p, e); err != nil {
				t.Fatalf("the command did not go out on a fresh connection: %v", err)
			}
			if p.Handshakes() != 3 {
				t.Errorf("handshakes %d, want 3 (the pool's, the one closed, the fresh one)", p.Handshakes())
			}
			if again, err := p.Get(ctx, e); err != nil || again == c {
				t.Errorf("the dead connection is handed out again (%v)", err)
			}
			_, err = c.Run(ctx, Cmd{Step: "test", Argv: []string{"true"}})
			if !errors.Is(err, ErrConnectionLost) {
				t.Errorf("a command on the dead connection: %v, want ErrConnectionLost", err)
			}
		})
	}
}

// A session the server refuses (sshd past its MaxSessions) is an error of
// that command only: the connection and the sessions on it stay, and the
// command is not sent again.
func TestRefusedSessionKeepsTheConnection(t *testing.T) {
	f := newFixture(t)
	p, e, c := f.connected(t, nil)
	ctx := context.Background()
	f.srv.SetRefuseSessions(true)
	_, err := p.Run(ctx, e, Cmd{Step: "test", Argv: []string{"true"}})
	var refused *ssh.OpenChannelError
	if !errors.As(err, &refused) || errors.Is(err, ErrConnectionLost) {
		t.Fatalf("want the refusal, got %v", err)
	}
	if c.isClosed() || p.Handshakes() != 1 {
		t.Fatalf("a refused session dropped the connection (closed %v, handshakes %d)", c.isClosed(), p.Handshakes())
	}
	f.srv.SetRefuseSessions(false)
	if got := run(t, c, "echo", "ok"); strings.TrimSpace(got) != "ok" {
		t.Errorf("after the refusal: %q", got)
	}
}

func TestOneConnectionPerEndpoint(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	p := f.pool(t, nil)
	var wg sync.WaitGroup
	conns := make([]*Conn, 8)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := p.Get(context.Background(), endpointOf(f.srv))
			if err != nil {
				t.Error(err)
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	for _, c := range conns {
		if c != conns[0] {
			t.Fatal("callers got different connections to one endpoint")
		}
	}
	if p.Handshakes() != 1 {
		t.Fatalf("handshakes = %d, want 1", p.Handshakes())
	}
}

func TestMaxParallelBoundsSessions(t *testing.T) {
	f := newFixture(t)
	_, _, c := f.connected(t, func(c *Config) { c.MaxParallel = 2 })
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); run(t, c, "sleep", "0.2") }()
	}
	wg.Wait()
	if m := f.srv.MaxRunning(); m != 2 {
		t.Fatalf("max concurrent sessions = %d, want 2", m)
	}
}

// Held locks do not take max_parallel slots: with as many locks held as
// slots, commands still run.
func TestHeldLocksLeaveParallelSlotsFree(t *testing.T) {
	f := newFixture(t)
	_, _, c := f.connected(t, func(c *Config) { c.MaxParallel = 2 })
	for i := 0; i < 2; i++ {
		h, err := c.Hold(context.Background(), Cmd{Step: "lock", Argv: Script(`echo ready; cat >/dev/null`)}, "ready")
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Run(ctx, Cmd{Step: "work", Argv: []string{"true"}}); err != nil {
		t.Fatalf("a command waited behind held locks: %v", err)
	}
}

func TestRunQuotesArgvAndReportsFailure(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	c, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	hostile := "$(echo pwned); `id` 'x' \"y\" *"
	if got := run(t, c, "printf", "%s", hostile); got != hostile {
		t.Fatalf("argv reached the shell altered: %q", got)
	}
	res, err := c.Run(context.Background(), Cmd{Step: "start ray", Argv: Script("cat; echo boom >&2; exit 7"), Stdin: []byte("in")})
	if ExitStatus(err) != 7 {
		t.Fatalf("exit status = %d (%v), want 7", ExitStatus(err), err)
	}
	if string(res.Stdout) != "in" {
		t.Fatalf("stdin did not arrive: %q", res.Stdout)
	}
	for _, want := range []string{endpointOf(f.srv).addr(), "start ray", "exit status 7", "boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
}

func TestRunHonoursContext(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	c, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	why := errors.New("no answer within the plan's deadline")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 200*time.Millisecond, why)
	defer cancel()
	start := time.Now()
	_, err = c.Run(ctx, Cmd{Step: "read node facts", Argv: []string{"sleep", "30"}})
	// The error names the node, the step and why it stopped.
	for _, want := range []string{endpointOf(f.srv).addr(), "read node facts", why.Error()} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
	if !errors.Is(err, why) || time.Since(start) > 5*time.Second {
		t.Fatalf("want a prompt deadline error, got %v after %s", err, time.Since(start))
	}
}

func TestUploadIsAtomicWithMode(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	c, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dir with space", "api.env")
	secret := []byte("VLLM_API_KEY=s3cr3t'$x\n")
	if err := c.Upload(context.Background(), "write env file", path, 0o600, secret); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(secret) {
		t.Fatalf("uploaded %q (%v), want %q", got, err, secret)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", fi.Mode().Perm())
	}
	left, _ := filepath.Glob(path + ".*")
	if len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}

func TestTunnelCarriesHTTP(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "healthy") }))
	defer web.Close()
	c, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: c.DialContext, Proxy: nil}}
	resp, err := hc.Get(web.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "healthy" || f.srv.Tunnels() == 0 {
		t.Fatalf("body %q through %d tunnels", b, f.srv.Tunnels())
	}
}

func TestNewPoolRejectsMissingCredentials(t *testing.T) {
	_, err := NewPool(Config{User: "ops", KnownHostsFile: os.DevNull})
	if err == nil || !strings.Contains(err.Error(), "private_key") {
		t.Fatalf("want an error naming the credential attributes, got %v", err)
	}
	t.Setenv("SSH_AUTH_SOCK", "") // no agent, whatever the machine running the test has
	_, err = NewPool(Config{User: "ops", UseAgent: true, AgentSocket: "", KnownHostsFile: os.DevNull})
	if err == nil {
		t.Fatal("use_agent without an agent was accepted")
	}
}

func TestHoldKeepsCommandUntilRelease(t *testing.T) {
	f := newFixture(t)
	f.trust(t, f.srv)
	c, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "released")
	h, err := c.Hold(context.Background(), Cmd{Step: "lock", Argv: Script(`echo ready; cat >/dev/null; touch "$1"`, marker)}, "ready")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("held command finished before Release")
	}
	h.Release()
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("held command did not finish on Release")
	}
	_, err = c.Hold(context.Background(), Cmd{Step: "lock", Argv: Script(`echo "held by someone" >&2; exit 73`)}, "ready")
	if ExitStatus(err) != 73 || !strings.Contains(err.Error(), "held by someone") {
		t.Fatalf("want exit 73 with stderr, got %v", err)
	}
}

// A node that is down behind a working bastion is unreachable (its removal
// and the destroy can leave it out, as for a node reached directly); a
// bastion that is down is not that node's fault, and is not.
func TestUnreachableThroughBastion(t *testing.T) {
	f := newFixture(t)
	jump := sshtest.New(t, f.client.Signer.PublicKey())
	f.trust(t, jump)
	je := endpointOf(jump)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := dead.Addr().(*net.TCPAddr).Port
	dead.Close() // nothing listens there now
	p := f.pool(t, func(c *Config) { c.Bastion = &je; c.ConnectTimeout = 2 * time.Second })
	_, err = p.Get(context.Background(), Endpoint{Host: "127.0.0.1", Port: deadPort, User: "ops"})
	if err == nil || !Unreachable(err) {
		t.Fatalf("a dead node behind a working bastion: Unreachable(%v) = false", err)
	}
	// The bastion itself down.
	down := je
	down.Port = deadPort
	_, err = f.pool(t, func(c *Config) { c.Bastion = &down; c.ConnectTimeout = 2 * time.Second }).Get(context.Background(), endpointOf(f.srv))
	if err == nil || Unreachable(err) {
		t.Fatalf("a dead bastion taken for an unreachable node: %v", err)
	}
}
