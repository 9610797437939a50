package mpplan

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/supervise"
)

// The lab's shape: two nodes, each on a management network (eth0, with the
// default route) and a fabric (eth1).
func pair() Spec {
	return Spec{Model: "/models/tiny", TP: 2, PP: 1, MasterPort: DefaultMasterPort, Port: 8000,
		Nodes: []Node{{Name: "spark1", Rank: 0, NodeIP: "192.168.229.11", Interface: "eth1"},
			{Name: "spark2", Rank: 1, NodeIP: "192.168.229.12", Interface: "eth1"}}}
}

func node(mgmt, fabric string) nodefacts.Facts {
	return nodefacts.Facts{VLLMVersion: "0.32.0", Interfaces: []nodefacts.Interface{
		{Name: "lo", Up: true, Addresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Name: "eth0", Up: true, Addresses: []netip.Prefix{netip.MustParsePrefix(mgmt + "/24")}},
		{Name: "eth1", Up: true, Addresses: []netip.Prefix{netip.MustParsePrefix(fabric + "/24")}}}}
}

func seenPair() map[string]Seen {
	s1, s2 := node("172.29.10.11", "192.168.229.11"), node("172.29.10.12", "192.168.229.12")
	s2.RouteTo = &nodefacts.Route{Dst: "192.168.229.11", Dev: "eth1", Src: "192.168.229.12"}
	return map[string]Seen{
		"spark1": {Facts: s1, ShmFree: 1 << 30, Routes: map[string]*nodefacts.Route{"192.168.229.12": {Dst: "192.168.229.12", Dev: "eth1"}}},
		"spark2": {Facts: s2, ShmFree: 1 << 30, Routes: map[string]*nodefacts.Route{"192.168.229.11": {Dst: "192.168.229.11", Dev: "eth1"}}}}
}

func edit(m map[string]Seen, name string, f func(*Seen)) {
	s := m[name]
	f(&s)
	m[name] = s
}

func rules(fs []finding.Finding) []string {
	var out []string
	for _, f := range fs {
		w := ""
		if f.Warning {
			w = " (warning)"
		}
		out = append(out, string(f.Rule)+" "+f.Node+" "+f.Path.String()+w)
	}
	slices.Sort(out)
	return out
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name   string
		spec   func(*Spec)
		seen   func(map[string]Seen)
		ours   bool
		want   []string
		detail string // in the first finding's detail
	}{
		{name: "clean pair serves", want: nil},
		{name: "master address is the worker's (field-report analogue)", spec: func(s *Spec) { s.MasterAddr = "192.168.229.12" },
			seen: func(m map[string]Seen) { m["spark2"].Facts.RouteTo.Dst = "192.168.229.12" },
			want: []string{"D26 spark1 master_addr"}, detail: "master_addr 192.168.229.12 is not bound on node spark1"},
		{name: "master address on the management network serves, off the fabric", spec: func(s *Spec) { s.MasterAddr = "172.29.10.11" },
			seen: func(m map[string]Seen) {
				*m["spark2"].Facts.RouteTo = nodefacts.Route{Dst: "172.29.10.11", Dev: "eth0", Src: "172.29.10.12"}
			},
			want: []string{"D26 spark2 master_addr (warning)"}},
		{name: "no route to the master", seen: func(m map[string]Seen) { s := m["spark2"]; s.Facts.RouteTo = nil; m["spark2"] = s },
			want: []string{"D26 spark2 master_addr"}},
		{name: "interface missing on the worker", spec: func(s *Spec) { s.Nodes[1].Interface = "enp1s0f1np1" },
			want: []string{"D27 spark2 nodes[\"spark2\"].interface"}, detail: `interface "enp1s0f1np1" does not exist on node spark2 (it has eth0, eth1)`},
		{name: "interface that does not carry node_ip", spec: func(s *Spec) { s.Nodes[1].Interface = "eth0" },
			want: []string{"D27 spark2 nodes[\"spark2\"].interface"}},
		{name: "node_ip not on its node", spec: func(s *Spec) { s.Nodes[1].NodeIP = "192.168.229.99"; s.Nodes[1].Interface = "" },
			want: []string{"D27 spark2 nodes[\"spark2\"].node_ip"}},
		{name: "port held by another user", seen: func(m map[string]Seen) {
			s := m["spark1"]
			s.Listening = map[int]string{29501: "listening on 0.0.0.0:29501"}
			m["spark1"] = s
		}, want: []string{"D29 spark1 master_port"}, detail: "Port 29501 on node spark1 (rank 0)"},
		{name: "ports held by this deployment itself", ours: true, seen: func(m map[string]Seen) {
			s := m["spark1"]
			s.Listening = map[int]string{8000: "x", 29501: "y"}
			m["spark1"] = s
		}, want: nil},
		{name: "vLLM too old", seen: func(m map[string]Seen) {
			edit(m, "spark1", func(s *Seen) { s.Facts.VLLMVersion = "0.11.0" })
			edit(m, "spark2", func(s *Seen) { s.Facts.VLLMVersion = "0.11.0" })
		},
			want: []string{"D28 spark1 nodes[\"spark1\"]", "D28 spark2 nodes[\"spark2\"]"}},
		{name: "vLLM differs", seen: func(m map[string]Seen) { edit(m, "spark2", func(s *Seen) { s.Facts.VLLMVersion = "0.33.0" }) },
			want: []string{"D28 spark2 nodes[\"spark2\"]"}, detail: "vLLM 0.33.0 on node spark2, 0.32.0 on node spark1"},
		{name: "vLLM missing", seen: func(m map[string]Seen) { edit(m, "spark2", func(s *Seen) { s.Facts.VLLMVersion = "" }) },
			want: []string{"D28 spark2 nodes[\"spark2\"]"}},
		{name: "Docker's default /dev/shm holds a headless rank", seen: func(m map[string]Seen) { edit(m, "spark2", func(s *Seen) { s.ShmFree = 64 << 20 }) },
			want: nil},
		{name: "Docker's default /dev/shm is too small for rank 0's ring", seen: func(m map[string]Seen) { edit(m, "spark1", func(s *Seen) { s.ShmFree = 64 << 20 }) },
			want: []string{"D30 spark1 nodes[\"spark1\"]"}, detail: "/dev/shm on node spark1 has 64 MiB free; vLLM's message queues for this layout take 185 MiB"},
		{name: "no /dev/shm", seen: func(m map[string]Seen) { edit(m, "spark2", func(s *Seen) { s.ShmFree = 0 }) },
			want: []string{"D30 spark2 nodes[\"spark2\"]"}},
		{name: "rank 0 cannot reach the headless node's address (its start would hang for good)",
			seen: func(m map[string]Seen) {
				edit(m, "spark1", func(s *Seen) { s.Routes = map[string]*nodefacts.Route{"192.168.229.12": nil} })
			},
			want: []string{"D26 spark1 nodes[\"spark2\"].node_ip"}, detail: "Node spark1 (rank 0) has no route to node_ip 192.168.229.12 of node spark2"},
		{name: "model missing on the worker", seen: func(m map[string]Seen) { s := m["spark2"]; s.ModelMissing = "no such directory"; m["spark2"] = s },
			want: []string{"D31 spark2 model"}},
		{name: "ranks repeated", spec: func(s *Spec) { s.Nodes[1].Rank = 0 }, want: []string{"D25  nodes"}, detail: "Nodes spark1, spark2 all have rank 0"},
		{name: "world size not divisible", spec: func(s *Spec) { s.TP = 3 }, want: []string{"D25  tensor_parallel_size"},
			detail: "Use a multiple of 2 ranks, or 1 or 3 nodes"},
		{name: "data parallel 2 over two nodes, TP 1 (measured: it serves)", spec: func(s *Spec) { s.TP, s.DP = 1, 2 }, want: nil},
		{name: "data parallel counts in the world size", spec: func(s *Spec) { s.TP, s.DP = 1, 3 }, want: []string{"D25  tensor_parallel_size"},
			detail: "1 x pipeline_parallel_size 1 x data_parallel_size 3 = 3 ranks"},
		{name: "with data parallel the master port is not checked", spec: func(s *Spec) { s.TP, s.DP = 1, 2 },
			seen: func(m map[string]Seen) { edit(m, "spark1", func(s *Seen) { s.Listening = map[int]string{29501: "x"} }) }, want: nil},
		{name: "restart on a node whose SSH user does not linger", spec: func(s *Spec) { s.Restart = "always" },
			seen: func(m map[string]Seen) {
				edit(m, "spark1", func(s *Seen) { s.Supervisor = supervise.ParseHost("systemd=yes\nuid=1000\nuser=ops\nlinger=yes") })
				edit(m, "spark2", func(s *Seen) { s.Supervisor = supervise.ParseHost("systemd=yes\nuid=1001\nuser=ops2\nlinger=no") })
			},
			want: []string{"D34 spark2 restart"}, detail: "`sudo loginctl enable-linger ops2` on spark2"},
		{name: "restart on a node without systemd", spec: func(s *Spec) { s.Restart = "on-failure" },
			seen: func(m map[string]Seen) {
				edit(m, "spark1", func(s *Seen) { s.Supervisor = supervise.ParseHost("systemd=no\nuid=0\nuser=root\nlinger=no") })
			},
			want: []string{"D34 spark1 restart"}, detail: "systemd is not the init on spark1"},
		{name: "restart no on the same nodes", seen: func(m map[string]Seen) {
			edit(m, "spark1", func(s *Seen) { s.Supervisor = supervise.ParseHost("systemd=no\nuid=1001\nuser=ops2\nlinger=no") })
		}, want: nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, seen := pair(), seenPair()
			if c.spec != nil {
				c.spec(&s)
				s.Nodes = Sorted(s.Nodes)
			}
			if c.seen != nil {
				c.seen(seen)
			}
			got := Check(s, seen, c.ours)
			if r := rules(got); !slices.Equal(r, c.want) {
				t.Fatalf("rules %q, want %q\n%+v", r, c.want, got)
			}
			if c.detail != "" && !strings.Contains(got[0].Detail, c.detail) {
				t.Errorf("detail %q lacks %q", got[0].Detail, c.detail)
			}
		})
	}
}

func TestArgvAndEnv(t *testing.T) {
	s := pair()
	s.ServedName = "tiny"
	s.ExtraArgs = []string{"--max-model-len", "256"}
	got0 := strings.Join(s.Argv("/opt/ray/bin/vllm", s.Nodes[0]), " ")
	want0 := "/opt/ray/bin/vllm serve /models/tiny --tensor-parallel-size 2 --pipeline-parallel-size 1 --distributed-executor-backend mp " +
		"--nnodes 2 --node-rank 0 --master-addr 192.168.229.11 --master-port 29501 --port 8000 --served-model-name tiny --max-model-len 256"
	if got0 != want0 {
		t.Errorf("rank 0 argv\n got %s\nwant %s", got0, want0)
	}
	got1 := strings.Join(s.Argv("", s.Nodes[1]), " ")
	want1 := "vllm serve /models/tiny --tensor-parallel-size 2 --pipeline-parallel-size 1 --distributed-executor-backend mp " +
		"--nnodes 2 --node-rank 1 --master-addr 192.168.229.11 --master-port 29501 --headless --max-model-len 256"
	if got1 != want1 {
		t.Errorf("rank 1 argv\n got %s\nwant %s", got1, want1)
	}
	s.DP, s.TP = 2, 1
	if got := strings.Join(s.Argv("vllm", s.Nodes[1]), " "); !strings.Contains(got, "--tensor-parallel-size 1 --pipeline-parallel-size 1 "+
		"--distributed-executor-backend mp --data-parallel-size 2 --data-parallel-backend mp --nnodes 2") {
		t.Errorf("data parallel argv %s", got)
	}
	s.Nodes[1].Interface = "enp1s0f1np1"
	env := s.Env(s.Nodes[1])
	if env["VLLM_HOST_IP"] != "192.168.229.12" || env["GLOO_SOCKET_IFNAME"] != "enp1s0f1np1" || env["NCCL_SOCKET_IFNAME"] != "enp1s0f1np1" {
		t.Errorf("rank 1 env %v: want its own address and interface", env)
	}
	if s.Env(s.Nodes[0])["GLOO_SOCKET_IFNAME"] != "eth1" {
		t.Errorf("rank 0 env %v: want its own interface", s.Env(s.Nodes[0]))
	}
}

func TestPeers(t *testing.T) {
	s := pair()
	s.Nodes = append(s.Nodes, Node{Name: "spark3", Rank: 2, NodeIP: "192.168.229.13"})
	if got := s.Peers(s.Nodes[0]); !slices.Equal(got, []string{"192.168.229.12", "192.168.229.13"}) {
		t.Errorf("rank 0 dials every headless node's queues: %v", got)
	}
	if got := s.Peers(s.Nodes[2]); !slices.Equal(got, []string{"192.168.229.11"}) {
		t.Errorf("a headless node dials rank 0's queue only: %v", got)
	}
}
