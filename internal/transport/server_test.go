package transport

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"
)

// testServer is an in-process SSH server: real handshake and auth, "exec"
// runs the command with the local /bin/sh, "direct-tcpip" dials for real.
type testServer struct {
	t        testing.TB
	ln       net.Listener
	key      atomic.Pointer[ssh.Signer] // swapped by tests while the server runs
	clientPK ssh.PublicKey

	silentKeepalive atomic.Bool  // stop answering keepalives
	tunnels         atomic.Int64 // direct-tcpip channels opened
	running         atomic.Int64 // exec sessions running now
	maxRunning      atomic.Int64
}

func newSigner(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	pems.Store(s, pem.EncodeToMemory(block))
	rawKeys[s] = priv
	return s
}

// rawKeys keeps the private key behind each test signer, for the agent test.
var rawKeys = map[ssh.Signer]ed25519.PrivateKey{}

func newTestServer(t testing.TB, client ssh.PublicKey) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, ln: ln, clientPK: client}
	s.setHostKey(newSigner(t))
	t.Cleanup(func() { ln.Close() })
	go s.serve()
	return s
}

func (s *testServer) endpoint() Endpoint {
	a := s.ln.Addr().(*net.TCPAddr)
	return Endpoint{Host: "127.0.0.1", Port: a.Port, User: "ops"}
}

func (s *testServer) hostKey() ssh.Signer { return *s.key.Load() }

func (s *testServer) setHostKey(k ssh.Signer) { s.key.Store(&k) }

func (s *testServer) hostKeyLine() string {
	return string(ssh.MarshalAuthorizedKey(s.hostKey().PublicKey()))
}

func (s *testServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.handle(c)
	}
}

func (s *testServer) handle(c net.Conn) {
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == string(s.clientPK.Marshal()) {
				return nil, nil
			}
			return nil, io.EOF
		},
	}
	cfg.AddHostKey(s.hostKey())
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		c.Close()
		return
	}
	defer sc.Close()
	go func() {
		for r := range reqs {
			if s.silentKeepalive.Load() {
				continue // never reply: a peer that has gone quiet
			}
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
	}()
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			go s.session(nc)
		case "direct-tcpip":
			go s.tunnel(nc)
		default:
			_ = nc.Reject(ssh.UnknownChannelType, "no")
		}
	}
}

func (s *testServer) session(nc ssh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	for r := range reqs {
		if r.Type != "exec" {
			_ = r.Reply(false, nil)
			continue
		}
		cmdline := string(r.Payload[4:])
		_ = r.Reply(true, nil)
		n := s.running.Add(1)
		for {
			m := s.maxRunning.Load()
			if n <= m || s.maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		cmd := exec.Command("/bin/sh", "-c", cmdline)
		cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
		// Like sshd, the command ending ends the session even while the
		// client still holds stdin open: feed stdin through a pipe that
		// Wait closes, instead of letting Wait wait for the client's EOF.
		stdin, _ := cmd.StdinPipe()
		err := cmd.Start()
		if err == nil {
			go func() { _, _ = io.Copy(stdin, ch); stdin.Close() }()
			err = cmd.Wait()
		}
		status := uint32(0)
		if err != nil {
			status = 255
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
					status = uint32(ws.ExitStatus())
				}
			}
		}
		s.running.Add(-1)
		b := make([]byte, 4)
		binary.BigEndian.PutUint32(b, status)
		_, _ = ch.SendRequest("exit-status", false, b)
		return
	}
}

func (s *testServer) tunnel(nc ssh.NewChannel) {
	var p struct {
		Host  string
		Port  uint32
		OHost string
		OPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &p); err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	target, err := net.Dial("tcp", net.JoinHostPort(p.Host, strconv.Itoa(int(p.Port))))
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		target.Close()
		return
	}
	s.tunnels.Add(1)
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(target, ch); target.(*net.TCPConn).CloseWrite() }()
	go func() { defer wg.Done(); _, _ = io.Copy(ch, target); _ = ch.CloseWrite() }()
	wg.Wait()
	ch.Close()
	target.Close()
}
