package sim

import (
	"fmt"
	"net/netip"
)

// What a test can vary on the simulated nodes: an operator's mistake or a
// fault, each shown to the provider as the real commands would show it
// (the facts script's sections, ss's lines, Ray's node table).

// SetRayVersion installs Ray version v on node i ("": no Ray there): the
// facts script's ray section prints it (nothing for none), and the node
// table of a GCS on that node reports it.
func (m *Model) SetRayVersion(i int, v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[i].RayVersion = v
}

// HoldPort has program, a process of the SSH user's, listen on port on
// node i (every address), as ss shows it; "" lets the port go.
func (m *Model) HoldPort(i, port int, program string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if program == "" {
		delete(m.nodes[i].held, port)
		return
	}
	m.nodes[i].held[port] = program
}

// MoveNode gives node i's fabric interface the address ip instead: the
// node is then on ip's /16, and reaches every other network through that
// network's gateway. What Ray registered before stays as it was (Ray does
// not notice until its heartbeats time out).
func (m *Model) MoveNode(i int, ip netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[i].IP = ip
}

// StartRay runs `ray start` on node i by hand, args as they follow
// "start" (a Ray the provider did not start: another user's, or an
// operator's).
func (m *Model) StartRay(i int, args ...string) error { return m.start(i, args) }

// KillRaylet kills node i's raylet. A worker's leaves the node table of
// its GCS as a node not alive (the GCS marks it dead) and nothing of it
// runs; the head's is dead in the table while its GCS keeps answering.
func (m *Model) KillRaylet(i int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rays[i]
	if r == nil || r.dead {
		return fmt.Errorf("no raylet runs on node %d", i)
	}
	if r.head {
		r.dead = true
		return nil
	}
	row := m.row(i, r)
	row.Alive = false
	m.dead = append(m.dead, deadNode{gcsAddr: r.gcsAddr, row: row})
	m.rays[i] = nil
	return nil
}

// Reboot restarts node i: nothing of Ray runs there any more (a head's GCS
// is gone with it, and with it the node table of its cluster); files stay.
func (m *Model) Reboot(i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rays[i]; r != nil && r.head {
		m.forgetGCS(r.gcsAddr)
	}
	m.rays[i] = nil
}

// Running reports whether a live raylet of the cluster at gcsAddr runs on
// node i.
func (m *Model) Running(i int, gcsAddr string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rays[i]
	return r != nil && !r.dead && r.gcsAddr == gcsAddr
}

// forgetGCS drops what the GCS at gcsAddr kept of dead nodes: it is gone,
// and a new one there starts with an empty table. The caller holds mu.
func (m *Model) forgetGCS(gcsAddr string) {
	kept := m.dead[:0]
	for _, d := range m.dead {
		if d.gcsAddr != gcsAddr {
			kept = append(kept, d)
		}
	}
	m.dead = kept
}
