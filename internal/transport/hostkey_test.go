package transport

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"

	"github.com/lab-infra/terraform-provider-spark/internal/transport/sshtest"
)

// newSigner makes a host key of another type than sshtest's ed25519.
func newSigner(t *testing.T, kind string) ssh.Signer {
	t.Helper()
	var priv any
	var err error
	switch kind {
	case "ecdsa":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "rsa":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		t.Fatalf("no key kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hostCert signs a host certificate for host's key with ca.
func hostCert(t *testing.T, ca, host ssh.Signer, principal string, validBefore uint64) ssh.Signer {
	t.Helper()
	cert := &ssh.Certificate{Key: host.PublicKey(), CertType: ssh.HostCert, KeyId: "node",
		ValidPrincipals: []string{principal}, ValidBefore: validBefore}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewCertSigner(cert, host)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// trustCA adds an @cert-authority line for s to known_hosts.
func (f *fixture) trustCA(t *testing.T, s *sshtest.Server, ca ssh.PublicKey) {
	t.Helper()
	var b bytes.Buffer
	if err := knownhosts.WriteKnownHostCA(&b, knownhosts.Normalize(s.Addr()), ca); err != nil {
		t.Fatal(err)
	}
	f.knownHostsLine(t, strings.TrimSpace(b.String()))
}

// A host certificate signed by a CA on an @cert-authority line for the host
// is accepted under strict, with nothing else about the host on file: the
// client asks for a certificate because the line says one is due.
func TestCertAuthorityAcceptsSignedHostCert(t *testing.T) {
	f := newFixture(t)
	ca, host := sshtest.NewKey(t).Signer, sshtest.NewKey(t).Signer
	f.srv.SetHostKeys(host, hostCert(t, ca, host, f.srv.Host(), ssh.CertTimeInfinity))
	f.trustCA(t, f.srv, ca.PublicKey())
	c, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, c, "echo", "signed"); got != "signed\n" {
		t.Fatalf("echo = %q", got)
	}
}

// A certificate from the trusted CA that is not valid (here: for another
// host) is refused, naming the CA and why.
func TestCertAuthorityRefusesInvalidCert(t *testing.T) {
	f := newFixture(t)
	ca, host := sshtest.NewKey(t).Signer, sshtest.NewKey(t).Signer
	f.srv.SetHostKeys(hostCert(t, ca, host, "other.example", ssh.CertTimeInfinity))
	f.trustCA(t, f.srv, ca.PublicKey())
	_, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if hk := hostKeyErr(t, err); hk.Problem != HostKeyBadCert {
		t.Fatalf("problem = %s, want bad-certificate", hk.Problem)
	}
	for _, want := range []string{ssh.FingerprintSHA256(host.PublicKey()), "@cert-authority ssh-ed25519 " + ssh.FingerprintSHA256(ca.PublicKey()),
		"principal", f.known} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
}

// A certificate no CA on file vouches for stands for its plain key, as in
// OpenSSH: accept-new records that key, and it is enough from then on.
func TestUntrustedCertIsJudgedByItsPlainKey(t *testing.T) {
	f := newFixture(t)
	host := sshtest.NewKey(t).Signer
	f.srv.SetHostKeys(hostCert(t, sshtest.NewKey(t).Signer, host, f.srv.Host(), ssh.CertTimeInfinity), host)
	if _, err := f.pool(t, func(c *Config) { c.Policy = PolicyAcceptNew }).Get(context.Background(), endpointOf(f.srv)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.known)
	if err != nil {
		t.Fatal(err)
	}
	if want := knownhosts.Line([]string{f.srv.Addr()}, host.PublicKey()); strings.TrimSpace(string(b)) != want {
		t.Fatalf("known_hosts = %q, want the plain key %q", b, want)
	}
	if _, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv)); err != nil {
		t.Fatal(err)
	}
}

// The whole message for a changed key, as operators (and the acceptance
// tests' patterns) know it: both fingerprints, the line on file, the fix.
func TestChangedKeyMessageNamesBothFingerprints(t *testing.T) {
	f := newFixture(t)
	old := f.srv.HostKey().PublicKey()
	f.trust(t, f.srv)
	next := sshtest.NewKey(t).Signer
	f.srv.SetHostKeys(next)
	_, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if hk := hostKeyErr(t, err); hk.Problem != HostKeyChanged {
		t.Fatalf("problem = %s, want changed", hk.Problem)
	}
	addr := f.srv.Addr()
	want := fmt.Sprintf("host key verification failed for %s: the host presented ssh-ed25519 key %s, but %s records ssh-ed25519 %s (line 1) for it. "+
		"The host key has CHANGED: if the node was reinstalled, remove the old entry (ssh-keygen -R [127.0.0.1]:%d -f %s) and connect again; "+
		"otherwise someone may be intercepting the connection",
		addr, ssh.FingerprintSHA256(next.PublicKey()), f.known, ssh.FingerprintSHA256(old), f.srv.Port(), f.known)
	if got := hostKeyErr(t, err).Error(); got != want {
		t.Fatalf("message:\n%s\nwant:\n%s", got, want)
	}
	// A node that answered with another key is not unreachable: removing
	// it from the cluster (as an unreachable worker is) would hide the change.
	if Unreachable(err) {
		t.Fatalf("a changed host key counts as unreachable: %v", err)
	}
}

// A changed key is refused even when the host also has a CA on file: the
// CA is listed, marked, among what known_hosts records.
func TestChangedKeyListsCertAuthority(t *testing.T) {
	f := newFixture(t)
	ca := sshtest.NewKey(t).Signer
	f.trust(t, f.srv)
	f.trustCA(t, f.srv, ca.PublicKey())
	f.srv.SetHostKeys(sshtest.NewKey(t).Signer)
	_, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if hk := hostKeyErr(t, err); hk.Problem != HostKeyChanged {
		t.Fatalf("problem = %s, want changed", hk.Problem)
	}
	if want := "@cert-authority ssh-ed25519 " + ssh.FingerprintSHA256(ca.PublicKey()) + " (line 2)"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error does not list %q:\n%v", want, err)
	}
}

// A host with several keys is asked for the one known_hosts (or the pin)
// holds. Without that, the client's default order (ECDSA, then RSA, then
// ed25519) would get another key and report the host as changed.
func TestNegotiatesTheKnownKeysAlgorithm(t *testing.T) {
	ed := sshtest.NewKey(t).Signer
	ec, rs := newSigner(t, "ecdsa"), newSigner(t, "rsa")
	for _, tc := range []struct {
		name   string
		offers []ssh.Signer
		known  ssh.Signer
		pin    bool
	}{
		{"ed25519 behind ecdsa", []ssh.Signer{ec, ed}, ed, false},
		{"rsa behind ecdsa", []ssh.Signer{ec, rs, ed}, rs, false},
		{"pinned ed25519 behind ecdsa", []ssh.Signer{ec, ed}, ed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.srv.SetHostKeys(tc.offers...)
			e := endpointOf(f.srv)
			if tc.pin {
				e.HostKey = keyLine(tc.known.PublicKey())
			} else {
				f.knownHostsLine(t, knownhosts.Line([]string{f.srv.Addr()}, tc.known.PublicKey()))
			}
			c, err := f.pool(t, nil).Get(context.Background(), e)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := c.HostKeyFingerprint(), ssh.FingerprintSHA256(tc.known.PublicKey()); got != want {
				t.Fatalf("negotiated key %s, want %s", got, want)
			}
		})
	}
}

// An expired certificate is refused even though its CA is trusted.
func TestCertAuthorityRefusesExpiredCert(t *testing.T) {
	f := newFixture(t)
	ca, host := sshtest.NewKey(t).Signer, sshtest.NewKey(t).Signer
	f.srv.SetHostKeys(hostCert(t, ca, host, f.srv.Host(), uint64(time.Now().Add(-time.Hour).Unix())))
	f.trustCA(t, f.srv, ca.PublicKey())
	_, err := f.pool(t, nil).Get(context.Background(), endpointOf(f.srv))
	if hk := hostKeyErr(t, err); hk.Problem != HostKeyBadCert || !strings.Contains(hk.Reason, "expired") {
		t.Fatalf("want an expired certificate refused, got %v", err)
	}
}
