package transport

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/skeema/knownhosts"
)

// Error is every failure this package returns: it names the host, the step
// that failed, and for remote commands the exit status and stderr's tail.
type Error struct {
	Host       string // host:port
	Step       string // what we were doing, in the operator's words
	ExitStatus int    // remote exit status; -1 when no command ran to completion
	Stderr     string // last lines of the remote stderr
	Err        error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ssh %s: %s", e.Host, e.Step)
	if e.ExitStatus >= 0 {
		fmt.Fprintf(&b, ": exit status %d", e.ExitStatus)
	} else if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		fmt.Fprintf(&b, "\nstderr (last lines):\n%s", s)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ExitStatus returns the remote exit status carried by err, or -1.
func ExitStatus(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.ExitStatus
	}
	return -1
}

// tailLines keeps the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// HostKeyProblem says why a host key was refused.
type HostKeyProblem string

const (
	HostKeyUnknown HostKeyProblem = "unknown"
	HostKeyChanged HostKeyProblem = "changed"
	HostKeyNotPin  HostKeyProblem = "pin-mismatch"
	// HostKeyBadCert is a host certificate signed by a CA that known_hosts
	// trusts for the host, but not valid (expired, or not for this host).
	HostKeyBadCert HostKeyProblem = "bad-certificate"
)

// stderrTailLines is how much of a failed command's stderr an error keeps.
const stderrTailLines = 20

// HostKeyError is a refused host key, with what the operator needs to decide.
type HostKeyError struct {
	Host        string // host:port
	Problem     HostKeyProblem
	KeyType     string // what the host presented
	Fingerprint string // SHA256:… of what the host presented
	Expected    []string
	KnownHosts  string
	Reason      string // why a certificate was refused (HostKeyBadCert)
}

func (e *HostKeyError) Error() string {
	switch e.Problem {
	case HostKeyUnknown:
		return fmt.Sprintf("host key verification failed for %s: the host presented an unknown %s key %s, which is not in %s. "+
			"Check that fingerprint out of band, then add the key to known_hosts (ssh-keyscan -t %s %s >> %s), "+
			"pin it on the node with host_key, or set host_key_policy = \"accept-new\"",
			e.Host, e.KeyType, e.Fingerprint, e.KnownHosts, shortType(e.KeyType), keyscanTarget(e.Host), e.KnownHosts)
	case HostKeyChanged:
		return fmt.Sprintf("host key verification failed for %s: the host presented %s key %s, but %s records %s for it. "+
			"The host key has CHANGED: if the node was reinstalled, remove the old entry (ssh-keygen -R %s -f %s) and connect again; "+
			"otherwise someone may be intercepting the connection",
			e.Host, e.KeyType, e.Fingerprint, e.KnownHosts, strings.Join(e.Expected, ", "), knownhosts.Normalize(e.Host), e.KnownHosts)
	case HostKeyBadCert:
		return fmt.Sprintf("host key verification failed for %s: the host presented a %s for key %s, signed by %s in %s, "+
			"but the certificate is not valid: %s. Renew the host certificate (for this host name, in date); "+
			"if that CA no longer vouches for the host, remove its @cert-authority line",
			e.Host, e.KeyType, e.Fingerprint, strings.Join(e.Expected, ", "), e.KnownHosts, e.Reason)
	default:
		return fmt.Sprintf("host key verification failed for %s: the host presented %s key %s, which does not match the pinned host_key (%s). "+
			"If the node was reinstalled, update host_key to the new public key line",
			e.Host, e.KeyType, e.Fingerprint, strings.Join(e.Expected, ", "))
	}
}

func shortType(t string) string {
	switch t {
	case "ssh-ed25519":
		return "ed25519"
	case "ssh-rsa":
		return "rsa"
	}
	if strings.HasPrefix(t, "ecdsa-") {
		return "ecdsa"
	}
	return t
}

// keyscanTarget is the ssh-keyscan arguments for host:port.
func keyscanTarget(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port == "22" {
		return strings.Trim(hostport, "[]")
	}
	return "-p " + port + " " + host
}

// Unreachable reports whether err is a failure to reach the host at all
// (no TCP connection, directly or through a working bastion, or no SSH
// handshake before the connect timeout), as opposed to a refused key, a
// command that failed on the host, or a bastion that is itself down (then
// every node behind it looks the same, and none is to blame).
func Unreachable(err error) bool {
	var e *Error
	var refused *HostKeyError // the host answered: its key is the problem
	return errors.As(err, &e) && e.ExitStatus < 0 && !errors.As(err, &refused) &&
		(e.Step == "connect" || e.Step == "handshake" || strings.HasPrefix(e.Step, tunnelStep))
}

// tunnelStep names the dial of a node through the bastion (the bastion is
// up: its own connection is the step "connect through bastion").
const tunnelStep = "open tunnel from bastion "
