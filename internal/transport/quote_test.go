package transport

import (
	"os/exec"
	"strings"
	"testing"
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
	f.Fuzz(func(t *testing.T, s string) {
		// A NUL can never be part of a shell argument, and sh reads bytes.
		if strings.ContainsRune(s, 0) || !utf8.ValidString(s) {
			t.Skip()
		}
		got := shEcho(t, []string{s})
		if len(got) != 1 || got[0] != s {
			t.Fatalf("Quote(%q) = %s came back as %q", s, Quote(s), got)
		}
	})
}
