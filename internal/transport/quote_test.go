package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	cases := map[string]string{
		"":                  "''",
		"plain":             "plain",
		"192.168.200.12":    "192.168.200.12",
		"--node-ip-address": "--node-ip-address",
		"a b":               "'a b'",
		"it's":              `'it'\''s'`,
		"$(reboot)":         "'$(reboot)'",
		"`id`":              "'`id`'",
		"a;b":               "'a;b'",
		"=x":                "'=x'",
		"ünïcode":           "'ünïcode'",
		"new\nline":         "'new\nline'",
	}
	for in, want := range cases {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %q, want %q", in, got, want)
		}
	}
}

// shEcho runs argv through a real /bin/sh and returns the words it saw.
func shEcho(t testing.TB, argv []string) []string {
	t.Helper()
	line := "printf '%s\\0' " + Join(argv...)
	out, err := exec.Command("/bin/sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	words := strings.Split(string(out), "\x00")
	return words[:len(words)-1]
}

func TestJoinRoundTripsThroughShell(t *testing.T) {
	argv := []string{"ray", "start", "--node-ip-address", "192.168.200.12", "it's", "$HOME", "a\"b", "*", "~", "", "x\ty"}
	got := shEcho(t, argv)
	if strings.Join(got, "|") != strings.Join(argv, "|") || len(got) != len(argv) {
		t.Fatalf("round trip changed argv:\n got %q\nwant %q", got, argv)
	}
}

func FuzzQuoteRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a", "'", "''", "$(id)", "`x`", "\\", "a b", "\n", "-n", "=", "!", "%", "{a,b}"} {
		f.Add(s)
	}
	sh := &shellSession{}
	f.Cleanup(sh.close)
	f.Fuzz(func(t *testing.T, s string) {
		// A NUL can never be part of a shell argument, and sh reads bytes.
		if strings.ContainsRune(s, 0) || !utf8.ValidString(s) {
			t.Skip()
		}
		got, err := sh.echo(Join(s))
		if err != nil {
			t.Fatalf("Quote(%q) = %s: %v", s, Quote(s), err)
		}
		if len(got) != 1 || got[0] != s {
			t.Fatalf("Quote(%q) = %s came back as %q", s, Quote(s), got)
		}
	})
}

// shellSession is one /bin/sh that reads commands on stdin, so the fuzzer
// runs thousands of inputs a second instead of starting a shell for each
// (which stalled it: minimisation alone starts hundreds).
type shellSession struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	n   int
}

// echo prints the words of a quoted command line, NUL-terminated, then a
// marker line; a quote that leaves the shell waiting for more input ends
// in a timeout, not a hang, and the shell is started afresh.
func (sh *shellSession) echo(quoted string) ([]string, error) {
	if sh.cmd == nil {
		sh.cmd = exec.Command("/bin/sh")
		sh.in, _ = sh.cmd.StdinPipe()
		stdout, _ := sh.cmd.StdoutPipe()
		sh.out = bufio.NewReader(stdout)
		if err := sh.cmd.Start(); err != nil {
			return nil, err
		}
	}
	sh.n++
	marker := fmt.Sprintf("\x01end-%d-%d\n", os.Getpid(), sh.n)
	if _, err := fmt.Fprintf(sh.in, "printf '%%s\\0' %s; printf '%%s\\n' %s\n", quoted, Quote(strings.TrimSuffix(marker, "\n"))); err != nil {
		sh.close()
		return nil, err
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var b strings.Builder
		for !strings.HasSuffix(b.String(), marker) {
			line, err := sh.out.ReadString('\n')
			b.WriteString(line)
			if err != nil {
				done <- result{b.String(), err}
				return
			}
		}
		done <- result{strings.TrimSuffix(b.String(), marker), nil}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			sh.close()
			return nil, fmt.Errorf("the shell ended: %w (output %q)", r.err, r.out)
		}
		words := strings.Split(r.out, "\x00")
		return words[:len(words)-1], nil
	case <-time.After(5 * time.Second):
		sh.close()
		return nil, errors.New("the shell is still waiting for input: the quoting left something open")
	}
}

func (sh *shellSession) close() {
	if sh.cmd != nil {
		_ = sh.in.Close()
		_ = sh.cmd.Process.Kill()
		_ = sh.cmd.Wait()
		sh.cmd = nil
	}
}
