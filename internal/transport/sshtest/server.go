// Package sshtest is an in-process SSH server for tests: a test double for
// sshd, used only in unit tests where a real sshd cannot run without a lab.
//
// The handshake and public key authentication are real (golang.org/x/crypto/ssh);
// "exec" runs the command with the local /bin/sh as the user running the
// tests, and "direct-tcpip" dials the target for real. Nothing else an sshd
// does (users, PTYs, subsystems, agent forwarding) is there.
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"
)

// Key is a fresh ed25519 key in the forms tests need: a signer for either
// side of a handshake, the raw key for an agent, and PEM for a key file.
type Key struct {
	Signer  ssh.Signer
	Private ed25519.PrivateKey
	PEM     []byte
}

// NewKey generates a Key, failing t if it cannot.
func NewKey(t testing.TB) Key {
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
	return Key{Signer: s, Private: priv, PEM: pem.EncodeToMemory(block)}
}

// Server is an SSH server on 127.0.0.1 that lets in one client key.
type Server struct {
	ln     net.Listener
	port   int
	client ssh.PublicKey
	keys   atomic.Pointer[[]ssh.Signer] // swapped by tests while the server runs

	silentKeepalive atomic.Bool  // stop answering keepalives
	refuseSessions  atomic.Bool  // reject session channels, as sshd past MaxSessions
	tunnels         atomic.Int64 // direct-tcpip channels opened
	running         atomic.Int64 // exec sessions running now
	maxRunning      atomic.Int64
}

// New starts a Server with a fresh ed25519 host key that accepts the client
// key; it stops listening when t ends.
func New(t testing.TB, client ssh.PublicKey) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{ln: ln, port: ln.Addr().(*net.TCPAddr).Port, client: client} //nolint:forcetypeassert // a "tcp" listener's address
	s.SetHostKeys(NewKey(t).Signer)
	t.Cleanup(func() { _ = ln.Close() })
	go s.serve()
	return s
}

// Host is the address the server listens on, without the port.
func (s *Server) Host() string { return "127.0.0.1" }

// Port is the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// Addr is host:port, the form known_hosts lines and errors name.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host(), strconv.Itoa(s.Port())) }

// HostKey is the first host key, the one a client gets unless it asks for
// another algorithm.
func (s *Server) HostKey() ssh.Signer { return (*s.keys.Load())[0] }

// SetHostKeys replaces the host keys for the next handshakes: one to play a
// reinstalled node, several (or a certificate signer from ssh.NewCertSigner)
// to test which one a client negotiates.
func (s *Server) SetHostKeys(keys ...ssh.Signer) {
	if len(keys) == 0 {
		panic("sshtest: a server needs at least one host key")
	}
	s.keys.Store(&keys)
}

// SetSilentKeepalive makes the server stop (or resume) answering global
// requests such as keepalives: a peer that has gone quiet.
func (s *Server) SetSilentKeepalive(on bool) { s.silentKeepalive.Store(on) }

// SetRefuseSessions makes the server reject new session channels while on,
// keeping the connection: as sshd does past its MaxSessions.
func (s *Server) SetRefuseSessions(on bool) { s.refuseSessions.Store(on) }

// Tunnels counts the direct-tcpip channels opened so far.
func (s *Server) Tunnels() int64 { return s.tunnels.Load() }

// MaxRunning is the most exec sessions that ever ran at once.
func (s *Server) MaxRunning() int64 { return s.maxRunning.Load() }

func (s *Server) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.handle(c)
	}
}

func (s *Server) config() *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == string(s.client.Marshal()) {
				return nil, nil
			}
			return nil, errUnknownClient
		},
	}
	for _, k := range *s.keys.Load() {
		cfg.AddHostKey(k)
	}
	return cfg
}
