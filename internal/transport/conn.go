package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// Conn is one shared SSH connection. At most SessionsPerConn sessions run on
// it at once, and at most the pool's MaxParallel across all connections.
type Conn struct {
	pool     *Pool
	addr     string
	client   *ssh.Client
	hostKey  ssh.PublicKey
	sessions chan struct{}

	closeOnce sync.Once
	closed    chan struct{}
	onClose   atomic.Pointer[func()] // set by the pool after the dial; the connection may close first
}

// setOnClose sets what Close calls; on a connection already closed, it is
// called at once.
func (c *Conn) setOnClose(f func()) {
	c.onClose.Store(&f)
	if c.isClosed() {
		f()
	}
}

func newConn(p *Pool, addr string, c *ssh.Client, hostKey ssh.PublicKey) *Conn {
	conn := &Conn{pool: p, addr: addr, client: c, hostKey: hostKey,
		sessions: make(chan struct{}, SessionsPerConn), closed: make(chan struct{})}
	go func() {
		_ = c.Wait() // the server went away or we closed it
		conn.Close()
	}()
	return conn
}

// Addr is host:port.
func (c *Conn) Addr() string { return c.addr }

// HostKeyFingerprint is the SHA256 fingerprint of the key the host presented.
func (c *Conn) HostKeyFingerprint() string { return ssh.FingerprintSHA256(c.hostKey) }

// Close drops the connection; the pool dials afresh on the next Get.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		_ = c.client.Close()
		if f := c.onClose.Load(); f != nil {
			(*f)()
		}
	})
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// keepalive asks the server for a reply every interval and drops the
// connection when none comes within timeout, so a dead peer fails fast
// instead of hanging the next command.
func (c *Conn) keepalive(interval, timeout time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		reply := make(chan error, 1)
		go func() {
			_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		select {
		case err := <-reply:
			if err != nil {
				c.Close()
				return
			}
		case <-time.After(timeout):
			c.Close()
			return
		case <-c.closed:
			return
		}
	}
}

// Cmd is one remote command.
type Cmd struct {
	Step  string   // what this does, for errors: "read node facts"
	Argv  []string // quoted element by element; never a shell string
	Stdin []byte   // secrets travel here, never in Argv
}

// Result is a finished command's output.
type Result struct {
	Stdout []byte
	Stderr []byte
}

func (c *Conn) acquire(ctx context.Context) (func(), error) {
	if held, _ := ctx.Value(slotsKey{}).(*Pool); held == c.pool {
		return c.acquireSession(ctx) // its slot was taken with TakeSlots
	}
	select {
	case c.pool.parallel <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		<-c.pool.parallel
		return nil, context.Cause(ctx)
	}
	return func() { <-c.sessions; <-c.pool.parallel }, nil
}

// acquireSession takes a session of this connection only (sshd's
// MaxSessions is per connection), not one of the provider-wide max_parallel
// slots: a held lock lasts the whole operation, and the work it protects
// needs those slots (with as many locks as slots, every command would wait
// until the timeout).
func (c *Conn) acquireSession(ctx context.Context) (func(), error) {
	select {
	case c.sessions <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	return func() { <-c.sessions }, nil
}

// ErrConnectionLost: the connection was gone when a command was to start
// on it, so nothing of the command ran and it can be sent again on a fresh
// connection (Pool.Run does).
var ErrConnectionLost = errors.New("the SSH connection was lost before the command started")

// newSession opens a session. A connection whose peer went away (its sshd
// killed, a firewall dropping it) fails here, often before the goroutine
// watching it has noticed: it is closed at once, so that the pool dials
// afresh instead of handing it out again. A session the server refuses
// (sshd's MaxSessions) leaves the connection, and its other sessions, alone.
func (c *Conn) newSession() (*ssh.Session, error) {
	s, err := c.client.NewSession()
	if err == nil {
		return s, nil
	}
	var refused *ssh.OpenChannelError
	if errors.As(err, &refused) {
		return nil, err
	}
	c.Close()
	return nil, fmt.Errorf("%w: %w", ErrConnectionLost, err)
}

// Run runs cmd and waits. A non-zero exit is an *Error carrying the exit
// status and the tail of stderr; Result is returned either way.
func (c *Conn) Run(ctx context.Context, cmd Cmd) (res *Result, err error) {
	defer logStep(ctx, c.addr, cmd, time.Now(), &err)
	return c.run(ctx, cmd)
}

func (c *Conn) run(ctx context.Context, cmd Cmd) (*Result, error) {
	fail := func(err error) error { return &Error{Host: c.addr, Step: cmd.Step, ExitStatus: -1, Err: err} }
	if len(cmd.Argv) == 0 {
		return nil, fail(errors.New("empty command"))
	}
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, fail(err)
	}
	defer release()
	s, err := c.newSession()
	if err != nil {
		return nil, fail(fmt.Errorf("open session: %w", err))
	}
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	if cmd.Stdin != nil {
		s.Stdin = bytes.NewReader(cmd.Stdin)
	}
	if err := s.Start(Join(cmd.Argv...)); err != nil {
		return nil, fail(fmt.Errorf("start: %w", err))
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = s.Signal(ssh.SIGKILL)
		_ = s.Close()
		return nil, fail(context.Cause(ctx))
	}
	res := &Result{Stdout: out.Bytes(), Stderr: errb.Bytes()}
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exit):
		return res, &Error{Host: c.addr, Step: cmd.Step, ExitStatus: exit.ExitStatus(),
			Stderr: tailLines(errb.String(), stderrTailLines), Err: err}
	default:
		return res, &Error{Host: c.addr, Step: cmd.Step, ExitStatus: -1,
			Stderr: tailLines(errb.String(), stderrTailLines), Err: err}
	}
}

// uploadScript writes stdin to a temporary file next to the target, sets the
// mode, then renames it into place: readers see the old file or the new one,
// never half of it. umask 077 keeps it private until chmod.
const uploadScript = `umask 077
dir=$(dirname -- "$1") && mkdir -p -- "$dir" &&
tmp=$(mktemp -- "$1.XXXXXX") &&
cat > "$tmp" && chmod -- "$2" "$tmp" && mv -f -- "$tmp" "$1" || { rm -f -- "$tmp"; exit 1; }`

// UploadArgv is the command that writes its stdin to path atomically with
// the given mode; wrap it to write somewhere else (inside a container).
func UploadArgv(path string, mode os.FileMode) []string {
	return Script(uploadScript, path, fmt.Sprintf("%04o", mode.Perm()))
}

// Upload writes data to path on the node atomically with the given mode.
func (c *Conn) Upload(ctx context.Context, step, path string, mode os.FileMode, data []byte) error {
	if data == nil {
		data = []byte{}
	}
	_, err := c.Run(ctx, Cmd{Step: step, Argv: UploadArgv(path, mode), Stdin: data})
	return err
}

// DialContext opens a TCP connection from the node to addr ("127.0.0.1:8000"
// is the node's own loopback). Use it as an http.Transport's DialContext to
// reach ports only the node can reach.
func (c *Conn) DialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	conn, err := c.client.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &Error{Host: c.addr, Step: "open tunnel to " + addr, ExitStatus: -1, Err: err}
	}
	return conn, nil
}

// Held is a remote command kept running until Release: a lock that lives
// exactly as long as the provider's interest in it. If the provider dies,
// the connection drops, the command ends, and the lock goes with it.
type Held struct {
	session *ssh.Session
	stdin   io.WriteCloser
	release func()
}

// Release ends the held command and waits for it.
func (h *Held) Release() {
	_ = h.stdin.Close()
	_ = h.session.Wait()
	_ = h.session.Close()
	h.release()
}

// Hold starts cmd and returns once it prints the line ready on stdout. The
// command keeps running (holding a session) until Release. If it exits
// before printing ready, its exit status and stderr are the error.
func (c *Conn) Hold(ctx context.Context, cmd Cmd, ready string) (h *Held, err error) {
	defer logStep(ctx, c.addr, cmd, time.Now(), &err)
	return c.hold(ctx, cmd, ready)
}

func (c *Conn) hold(ctx context.Context, cmd Cmd, ready string) (*Held, error) {
	fail := func(err error) error { return &Error{Host: c.addr, Step: cmd.Step, ExitStatus: -1, Err: err} }
	release, err := c.acquireSession(ctx)
	if err != nil {
		return nil, fail(err)
	}
	s, stdin, stdout, errb, err := c.startHeld(cmd)
	if err != nil {
		release()
		return nil, fail(err)
	}
	select {
	case ok := <-readyLine(stdout, ready):
		if ok {
			return &Held{session: s, stdin: stdin, release: release}, nil
		}
		err := s.Wait()
		s.Close()
		release()
		return nil, &Error{Host: c.addr, Step: cmd.Step, ExitStatus: exitStatus(err), Stderr: tailLines(errb.String(), stderrTailLines), Err: err}
	case <-ctx.Done():
		_ = s.Signal(ssh.SIGKILL)
		s.Close()
		release()
		return nil, fail(ctx.Err())
	}
}

// startHeld opens a session and starts cmd on it with its stdin and stdout
// as pipes (the held command lives until stdin closes) and its stderr
// collected. On failure the session is already closed.
func (c *Conn) startHeld(cmd Cmd) (*ssh.Session, io.WriteCloser, io.Reader, *bytes.Buffer, error) {
	s, err := c.newSession()
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("open session: %w", err)
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, nil, nil, nil, err
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, nil, nil, nil, err
	}
	var errb bytes.Buffer
	s.Stderr = &errb
	if err := s.Start(Join(cmd.Argv...)); err != nil {
		s.Close()
		return nil, nil, nil, nil, fmt.Errorf("start: %w", err)
	}
	return s, stdin, stdout, &errb, nil
}

// readyLine reports, once, whether out printed the line ready before it
// ended. After ready it keeps draining out, so the remote command never
// blocks on a full stdout.
func readyLine(out io.Reader, ready string) <-chan bool {
	got := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == ready {
				got <- true
				_, _ = io.Copy(io.Discard, out)
				return
			}
		}
		got <- false
	}()
	return got
}

// exitStatus is the remote exit status err carries, -1 when it carries none
// (the command was killed, or the connection failed).
func exitStatus(err error) int {
	var exit *ssh.ExitError
	if errors.As(err, &exit) {
		return exit.ExitStatus()
	}
	return -1
}
