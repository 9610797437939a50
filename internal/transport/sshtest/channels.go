package sshtest

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/crypto/ssh"
)

var errUnknownClient = errors.New("sshtest: client key not accepted")

func (s *Server) handle(c net.Conn) {
	sc, chans, reqs, err := ssh.NewServerConn(c, s.config())
	if err != nil {
		c.Close()
		return
	}
	defer func() { _ = sc.Close() }()
	go s.globalRequests(reqs)
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			if s.refuseSessions.Load() {
				_ = nc.Reject(ssh.Prohibited, "open failed")
				continue
			}
			go s.session(nc)
		case "direct-tcpip":
			go s.tunnel(nc)
		default:
			_ = nc.Reject(ssh.UnknownChannelType, "no")
		}
	}
}

// globalRequests refuses every global request, as sshd refuses the
// keepalive@openssh.com a client sends, unless the server is told to be
// silent: a refusal is still an answer.
func (s *Server) globalRequests(reqs <-chan *ssh.Request) {
	for r := range reqs {
		if s.silentKeepalive.Load() {
			continue // never reply: a peer that has gone quiet
		}
		if r.WantReply {
			_ = r.Reply(false, nil)
		}
	}
}

// session runs the first "exec" request of a session with /bin/sh.
func (s *Server) session(nc ssh.NewChannel) { ServeExec(nc, s.exec) }

// ServeExec accepts a session and answers its first "exec" request with
// run, then ends the session with run's exit status as sshd does; other
// requests are refused. The unit tests' server and the simulated nodes
// (internal/sim) both answer sessions through it.
func ServeExec(nc ssh.NewChannel, run func(ch ssh.Channel, command string) uint32) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer func() { _ = ch.Close() }()
	for r := range reqs {
		var exe struct{ Command string }
		if r.Type != "exec" || ssh.Unmarshal(r.Payload, &exe) != nil {
			_ = r.Reply(false, nil)
			continue
		}
		_ = r.Reply(true, nil)
		go ssh.DiscardRequests(reqs)
		status := run(ch, exe.Command)
		b := make([]byte, 4)
		binary.BigEndian.PutUint32(b, status)
		_, _ = ch.SendRequest("exit-status", false, b)
		return
	}
}

// exec runs cmdline with /bin/sh on ch and returns its exit status,
// counting it among the sessions running at once.
func (s *Server) exec(ch ssh.Channel, cmdline string) uint32 {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for {
		m := s.maxRunning.Load()
		if n <= m || s.maxRunning.CompareAndSwap(m, n) {
			break
		}
	}
	cmd := exec.Command("/bin/sh", "-c", cmdline)
	cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
	// Like sshd, the command ending ends the session even while the client
	// still holds stdin open: feed stdin through a pipe that Wait closes,
	// instead of letting Wait wait for the client's EOF.
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err == nil {
		go func() { _, _ = io.Copy(stdin, ch); _ = stdin.Close() }()
		err = cmd.Wait()
	}
	return exitStatus(err)
}

// exitStatus is what sshd would report for a command that ended with err:
// its exit code, or 255 when it could not run or was killed.
func exitStatus(err error) uint32 {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Exited() {
			return uint32(ws.ExitStatus())
		}
	}
	return 255
}

// tunnel dials the target of a direct-tcpip channel and copies both ways
// until each side has closed its half.
func (s *Server) tunnel(nc ssh.NewChannel) {
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
	target, err := dialTCP(net.JoinHostPort(p.Host, strconv.Itoa(int(p.Port))))
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	defer func() { _ = target.Close() }()
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer func() { _ = ch.Close() }()
	s.tunnels.Add(1)
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(target, ch); _ = target.CloseWrite() }()
	go func() { defer wg.Done(); _, _ = io.Copy(ch, target); _ = ch.CloseWrite() }()
	wg.Wait()
}

// dialTCP dials addr as TCP, whose half-close passes the client's EOF on.
func dialTCP(addr string) (*net.TCPConn, error) {
	ra, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	return net.DialTCP("tcp", nil, ra)
}
