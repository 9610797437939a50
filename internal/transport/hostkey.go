package transport

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
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

// pinnedAlgorithms asks the host for the pinned key's own algorithm, so a
// host with several keys offers the one we hold. An RSA key signs with
// SHA-2 first: plain ssh-rsa (SHA-1) only for hosts that know nothing else.
func pinnedAlgorithms(k ssh.PublicKey) []string {
	if k.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{k.Type()}
}

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
		}, pinnedAlgorithms(pinned), nil
	}
	if v.policy == PolicyInsecure {
		return func(_ string, _ net.Addr, key ssh.PublicKey) error {
			*seen = key
			return nil
		}, nil, nil
	}
	db, err := v.load()
	if err != nil {
		return nil, nil, err
	}
	// Only the algorithms of what known_hosts holds for addr (certificates
	// for an @cert-authority line): otherwise a host with several keys may
	// offer one we do not hold and look changed. Unknown hosts get nil, the
	// library's defaults, and whatever key they offer first.
	algos := db.HostKeyAlgorithms(addr)
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		*seen = key
		return v.judge(db, addr, hostname, remote, key)
	}, algos, nil
}

// judge applies known_hosts and the policy to the key a host presented. A
// certificate is judged as OpenSSH does: one signed by a CA that
// known_hosts trusts for the host must be valid; any other certificate
// stands for its plain key.
func (v *verifier) judge(db *knownhosts.HostKeyDB, addr, hostname string, remote net.Addr, key ssh.PublicKey) error {
	err := db.HostKeyCallback()(hostname, remote, key)
	var revoked *xknownhosts.RevokedError
	var ke *xknownhosts.KeyError
	cert, isCert := key.(*ssh.Certificate)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &revoked):
		return err // knownhosts says it well
	case isCert && signedByAuthority(db, addr, cert):
		return &HostKeyError{Host: addr, Problem: HostKeyBadCert, KeyType: cert.Type(),
			Fingerprint: ssh.FingerprintSHA256(cert.Key), KnownHosts: v.knownHosts, Reason: err.Error(),
			Expected: []string{authorityLabel + cert.SignatureKey.Type() + " " + ssh.FingerprintSHA256(cert.SignatureKey)}}
	case isCert:
		return v.judge(db, addr, hostname, remote, cert.Key)
	case errors.As(err, &ke) && len(ke.Want) == 0:
		if v.policy == PolicyAcceptNew {
			return v.record(addr, key)
		}
		return &HostKeyError{Host: addr, Problem: HostKeyUnknown, KeyType: key.Type(),
			Fingerprint: ssh.FingerprintSHA256(key), KnownHosts: v.knownHosts}
	case errors.As(err, &ke):
		return &HostKeyError{Host: addr, Problem: HostKeyChanged, KeyType: key.Type(),
			Fingerprint: ssh.FingerprintSHA256(key), Expected: expected(db, addr, ke.Want), KnownHosts: v.knownHosts}
	default:
		return err
	}
}

// authorityLabel marks a CA among what known_hosts records, as the file does.
const authorityLabel = "@cert-authority "

// signedByAuthority reports whether cert's signer is on an @cert-authority
// line for addr.
func signedByAuthority(db *knownhosts.HostKeyDB, addr string, cert *ssh.Certificate) bool {
	for _, k := range db.HostKeys(addr) {
		if k.Cert && bytes.Equal(k.Marshal(), cert.SignatureKey.Marshal()) {
			return true
		}
	}
	return false
}

// expected lists what known_hosts records for addr (want), each with its
// line so the operator can find it; CAs are marked, since a CA's key is not
// the host's own.
func expected(db *knownhosts.HostKeyDB, addr string, want []xknownhosts.KnownKey) []string {
	cas := map[string]bool{}
	for _, k := range db.HostKeys(addr) {
		if k.Cert {
			cas[string(k.Marshal())] = true
		}
	}
	out := make([]string, 0, len(want))
	for _, w := range want {
		label := ""
		if cas[string(w.Key.Marshal())] {
			label = authorityLabel
		}
		out = append(out, fmt.Sprintf("%s%s %s (line %d)", label, w.Key.Type(), ssh.FingerprintSHA256(w.Key), w.Line))
	}
	return out
}

// load reads known_hosts; a missing file is empty (accept-new creates it).
func (v *verifier) load() (*knownhosts.HostKeyDB, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, err := os.Stat(v.knownHosts); errors.Is(err, os.ErrNotExist) {
		if v.policy != PolicyAcceptNew {
			return knownhosts.NewDB(os.DevNull)
		}
		if err := os.MkdirAll(filepath.Dir(v.knownHosts), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(v.knownHosts, nil, 0o600); err != nil {
			return nil, err
		}
	}
	db, err := knownhosts.NewDB(v.knownHosts)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts_file %s: %w", v.knownHosts, err)
	}
	return db, nil
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
	_, err = fmt.Fprintln(f, knownhosts.Line([]string{addr}, key))
	return err
}
