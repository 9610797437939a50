package sim

import (
	"net"
	"sync"
	"time"
)

// delayedConn delays everything the node sends by rtt: each request the
// provider makes (a key exchange step, a channel open, an exec) gets its
// answer one round trip later, as over a network with that round-trip
// time. Writes return at once, as into a socket buffer; the bytes go out
// in order, each rtt after it was written.
type delayedConn struct {
	net.Conn
	rtt   time.Duration
	queue chan delayed

	closeOnce sync.Once
	done      chan struct{}
}

type delayed struct {
	due time.Time
	b   []byte
}

func withRTT(c net.Conn, rtt time.Duration) net.Conn {
	if rtt <= 0 {
		return c
	}
	d := &delayedConn{Conn: c, rtt: rtt, queue: make(chan delayed, 1024), done: make(chan struct{})}
	go d.send()
	return d
}

func (d *delayedConn) Write(b []byte) (int, error) {
	select {
	case d.queue <- delayed{due: time.Now().Add(d.rtt), b: append([]byte(nil), b...)}:
		return len(b), nil
	case <-d.done:
		return 0, net.ErrClosed
	}
}

// send writes what was queued once it is due, in order.
func (d *delayedConn) send() {
	for {
		select {
		case w := <-d.queue:
			time.Sleep(time.Until(w.due))
			if _, err := d.Conn.Write(w.b); err != nil {
				_ = d.Close()
				return
			}
		case <-d.done:
			return
		}
	}
}

func (d *delayedConn) Close() error {
	d.closeOnce.Do(func() { close(d.done) })
	return d.Conn.Close()
}
