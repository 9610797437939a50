package sim

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
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

// CutOff drops node i's connections to other nodes (a firewall rule, a
// switch port down) while its addresses stay; Ray keeps it alive in its
// table until heartbeats time out.
func (m *Model) CutOff(i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[i].firewalled = true
}

// RegisterAs makes the raylets started on node i from now on register
// under ip, whatever --node-ip-address says: a Ray that detects its own
// address another way (a wrapper, another release) than the plan predicted.
func (m *Model) RegisterAs(i int, ip netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[i].registersAs = ip
}

// SetToken writes Ray's auth token on node i (~/.ray/auth_token), as the
// provider's token script or another apply would.
func (m *Model) SetToken(i int, token string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens[i] = token
}

// Token is Ray's auth token on node i ("" when it holds none).
func (m *Model) Token(i int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tokens[i]
}

// OtherGCSLayout makes every GCS answer its gRPC calls in a layout the
// provider's decoder does not know, as a Ray release that renumbered
// GcsNodeInfo would: the provider must read the table with Python then.
func (m *Model) OtherGCSLayout() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.otherGCSLayout = true
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
	groups := m.removed[:0]
	for _, g := range m.removed {
		if g.gcsAddr != gcsAddr {
			groups = append(groups, g)
		}
	}
	m.removed = groups
}

// SetVLLMVersion installs vLLM version v in Ray's Python on node i ("":
// none): the facts script's vllm section prints it.
func (m *Model) SetVLLMVersion(i int, v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[i].VLLMVersion = v
}

// WriteFile puts a file on node i, as an operator would (an api_key_file).
func (m *Model) WriteFile(i int, path, content string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[i][path] = content
}

// VLLM is what a vllm serve on port of node i is: its identity, the name
// it serves, and its environment; ok false when none listens there.
func (m *Model) VLLM(i, port int) (identity, served string, env map[string]string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vllmAt(i, port)
	if v == nil {
		return "", "", nil, false
	}
	return v.identity(), v.served, maps.Clone(v.env), true
}

// VLLMCmdline is the command line of the vllm serve on port of node i, as
// /proc/<pid>/cmdline has it; nil when none listens there.
func (m *Model) VLLMCmdline(i, port int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := m.vllmAt(i, port); v != nil {
		return slices.Clone(v.cmdline)
	}
	return nil
}

// KillVLLM kills the vllm serve on port of node i: its files stay.
func (m *Model) KillVLLM(i, port int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vllmAt(i, port)
	if v == nil {
		return fmt.Errorf("no vllm serve on port %d of node %d", port, i)
	}
	m.removeVLLM(i, v)
	return nil
}

// HealthLate, given to SetVLLMHealth, makes /health answer nothing until
// the client gives up: a server too busy to answer in time.
const HealthLate = -1

// SetVLLMHealth has the vllm serve on port of node i answer /health with
// status code (HealthLate: not in time).
func (m *Model) SetVLLMHealth(i, port, code int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vllmAt(i, port)
	if v == nil {
		return fmt.Errorf("no vllm serve on port %d of node %d", port, i)
	}
	v.health = code
	return nil
}

// LaunchUnderWay makes the vLLM on node i's port look like another apply's
// launch still loading its model: its start marker names holder, and that
// apply holds the launch lock (vllm.LaunchLockScript) until LaunchDone.
func (m *Model) LaunchUnderWay(i, port int, holder string) {
	dir := deploymentDir(port)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[i][dir+"/starting"] = holder + "\n"
	m.launchLocks[i][dir] = true
}

// LaunchDone ends LaunchUnderWay: the other apply's server answered.
func (m *Model) LaunchDone(i, port int) {
	dir := deploymentDir(port)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files[i], dir+"/starting")
	delete(m.launchLocks[i], dir)
}
