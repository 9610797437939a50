package vllm

import (
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// The watch, run by a local python3 beside a stand-in for vLLM (sleep):
// it ends the stand-in when the connection it depends on ends, and only
// then. No node, no vLLM: the watch's logic is plain sockets.
func TestWatchScript(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 on this machine")
	}
	listen := func(addr string) net.Listener {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	start := func(args ...string) (*exec.Cmd, chan error) {
		vllm := exec.Command("sleep", "120")
		if err := vllm.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- vllm.Wait() }()
		w := exec.Command("python3", append([]string{"-c", WatchScript, strconv.Itoa(vllm.Process.Pid)}, args...)...)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = vllm.Process.Kill(); _ = w.Process.Kill(); _ = w.Wait() })
		return vllm, done
	}
	accept := func(l net.Listener) net.Conn {
		_ = l.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
		c, err := l.Accept()
		if err != nil {
			t.Fatalf("the watch did not connect: %v", err)
		}
		return c
	}
	ended := func(done chan error, want bool, what string) {
		t.Helper()
		select {
		case err := <-done:
			if !want {
				t.Fatalf("%s: the stand-in ended (%v)", what, err)
			}
		case <-time.After(4 * time.Second):
			if want {
				t.Fatalf("%s: the stand-in still runs", what)
			}
		}
	}

	t.Run("headless: rank 0's store goes, so does the rank", func(t *testing.T) {
		store := listen("127.0.0.1:0")
		port := strconv.Itoa(store.Addr().(*net.TCPAddr).Port)
		_, done := start("headless", port, "-", "-", "127.0.0.1", "127.0.0.2")
		c := accept(store)
		ended(done, false, "while the store holds the connection")
		c.Close()
		ended(done, true, "after the store closed it")
	})

	t.Run("rank 0: a loss before the set formed reconnects; after, ends the rank", func(t *testing.T) {
		peer := listen("127.0.0.1:0")
		port := strconv.Itoa(peer.Addr().(*net.TCPAddr).Port)
		api := listen("127.0.0.1:0")
		apiPort := strconv.Itoa(api.Addr().(*net.TCPAddr).Port)
		api.Close() // not serving yet
		_, done := start("rank0", port, "127.0.0.1", apiPort, "127.0.0.1")
		accept(peer).Close()
		ended(done, false, "a peer lost before the API answers")
		c := accept(peer) // it connected again
		listen("127.0.0.1:" + apiPort)
		time.Sleep(6 * time.Second) // a select round: the set formed
		c.Close()
		ended(done, true, "a peer lost once the API answers")
	})
}
