package transport

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyPolicy decides what to do with a host key not pinned on the node.
type HostKeyPolicy string

const (
	// PolicyStrict refuses unknown and changed keys.
	PolicyStrict HostKeyPolicy = "strict"
	// PolicyAcceptNew records unknown keys in known_hosts, refuses changed ones.
	PolicyAcceptNew HostKeyPolicy = "accept-new"
	// PolicyInsecure checks nothing. The provider warns on every plan.
	PolicyInsecure HostKeyPolicy = "insecure"
)

// ParseHostKey parses an authorized_keys-style line ("ssh-ed25519 AAAA… [comment]").
func ParseHostKey(line string) (ssh.PublicKey, error) {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(line)))
	if err != nil {
		return nil, fmt.Errorf("not an SSH public key line (want e.g. \"ssh-ed25519 AAAAC3Nza…\", as in /etc/ssh/ssh_host_ed25519_key.pub): %w", err)
	}
	return k, nil
}

// algorithmsFor lists host key algorithms that match keys of type t, so the
// server offers the key we hold rather than another type it also has.
func algorithmsFor(types ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range types {
		algs := []string{t}
		if t == ssh.KeyAlgoRSA {
			algs = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
		}
		for _, a := range algs {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// probeKey never matches a real host; asking known_hosts about it returns
// the keys on file for a host, which tells us which algorithms to ask for.
var probeKey = func() ssh.PublicKey {
	pub, _, _ := ed25519.GenerateKey(bytes.NewReader(make([]byte, 64)))
	k, _ := ssh.NewPublicKey(pub)
	return k
}()

// verifier checks host keys for one pool.
type verifier struct {
	policy     HostKeyPolicy
	knownHosts string
	mu         sync.Mutex // serialises known_hosts appends
}

// check returns the host key callback and preferred algorithms for a dial to
// addr. pinned, when set, wins over known_hosts. seen receives the key the
// host presented.
func (v *verifier) check(addr string, pinned ssh.PublicKey, seen *ssh.PublicKey) (ssh.HostKeyCallback, []string, error) {
	if pinned != nil {
		return func(_ string, _ net.Addr, key ssh.PublicKey) error {
			*seen = key
			if bytes.Equal(key.Marshal(), pinned.Marshal()) {
				return nil
			}
			return &HostKeyError{Host: addr, Problem: HostKeyNotPin, KeyType: key.Type(),
				Fingerprint: ssh.FingerprintSHA256(key), Expected: []string{pinned.Type() + " " + ssh.FingerprintSHA256(pinned)}}
		}, algorithmsFor(pinned.Type()), nil
	}
	if v.policy == PolicyInsecure {
		return func(_ string, _ net.Addr, key ssh.PublicKey) error {
			*seen = key
			return nil
		}, nil, nil
	}
	kh, err := v.load()
	if err != nil {
		return nil, nil, err
	}
	var algos []string
	var ke *knownhosts.KeyError
	if err := kh(addr, fakeAddr{}, probeKey); errors.As(err, &ke) {
		var types []string
		for _, w := range ke.Want {
			types = append(types, w.Key.Type())
		}
		algos = algorithmsFor(types...)
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		*seen = key
		err := kh(hostname, remote, key)
		var ke *knownhosts.KeyError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ke) && len(ke.Want) == 0:
			if v.policy == PolicyAcceptNew {
				return v.record(addr, key)
			}
			return &HostKeyError{Host: addr, Problem: HostKeyUnknown, KeyType: key.Type(),
				Fingerprint: ssh.FingerprintSHA256(key), KnownHosts: v.knownHosts}
		case errors.As(err, &ke):
			var want []string
			for _, w := range ke.Want {
				want = append(want, fmt.Sprintf("%s %s (line %d)", w.Key.Type(), ssh.FingerprintSHA256(w.Key), w.Line))
			}
			return &HostKeyError{Host: addr, Problem: HostKeyChanged, KeyType: key.Type(),
				Fingerprint: ssh.FingerprintSHA256(key), Expected: want, KnownHosts: v.knownHosts}
		default:
			return err // revoked keys and the like: knownhosts says it well
		}
	}, algos, nil
}

// load reads known_hosts; a missing file is empty (accept-new creates it).
func (v *verifier) load() (ssh.HostKeyCallback, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, err := os.Stat(v.knownHosts); errors.Is(err, os.ErrNotExist) {
		if v.policy != PolicyAcceptNew {
			return knownhosts.New(os.DevNull)
		}
		if err := os.MkdirAll(filepath.Dir(v.knownHosts), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(v.knownHosts, nil, 0o600); err != nil {
			return nil, err
		}
	}
	kh, err := knownhosts.New(v.knownHosts)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts_file %s: %w", v.knownHosts, err)
	}
	return kh, nil
}

// record appends a first-seen key, as OpenSSH's accept-new does.
func (v *verifier) record(addr string, key ssh.PublicKey) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	f, err := os.OpenFile(v.knownHosts, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("record host key in %s: %w", v.knownHosts, err)
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, knownhosts.Line([]string{knownhosts.Normalize(addr)}, key))
	return err
}

type fakeAddr struct{}

func (fakeAddr) Network() string { return "tcp" }
func (fakeAddr) String() string  { return "0.0.0.0:0" }
