package transport

import (
	"errors"
	"strings"
	"testing"
)

func TestReadyLine(t *testing.T) {
	for _, c := range []struct {
		out  string
		want bool
	}{
		{"starting\nready\nmore output\n", true},
		{"ready", true},
		{"not ready\nalready\n", false},
		{"", false},
	} {
		if got := <-readyLine(strings.NewReader(c.out), "ready"); got != c.want {
			t.Errorf("readyLine(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}

func TestExitStatusWithoutExit(t *testing.T) {
	if exitStatus(nil) != -1 || exitStatus(errors.New("connection lost")) != -1 {
		t.Fatal("an error without an exit status gave one")
	}
}
