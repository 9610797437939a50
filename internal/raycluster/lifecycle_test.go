package raycluster

import (
	"maps"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

func TestStartEnv(t *testing.T) {
	for _, c := range []struct {
		name         string
		s            Spec
		node         NodeSpec
		registeredIP string
		want         map[string]string
	}{
		{name: "nothing set, registered IP becomes VLLM_HOST_IP", registeredIP: "192.168.200.13",
			want: map[string]string{"VLLM_HOST_IP": "192.168.200.13", "RAY_AUTH_MODE": "disabled"}},
		{name: "no registered IP, no VLLM_HOST_IP", want: map[string]string{"RAY_AUTH_MODE": "disabled"}},
		{name: "VLLM_HOST_IP given in env is kept", registeredIP: "192.168.200.13",
			s:    Spec{Env: map[string]string{"VLLM_HOST_IP": "10.0.0.9"}},
			want: map[string]string{"VLLM_HOST_IP": "10.0.0.9", "RAY_AUTH_MODE": "disabled"}},
		{name: "secret env over env", registeredIP: "192.168.200.13",
			s:    Spec{Env: map[string]string{"HF_TOKEN": "plain", "A": "1"}, SecretEnv: map[string]string{"HF_TOKEN": "secret"}},
			want: map[string]string{"HF_TOKEN": "secret", "A": "1", "VLLM_HOST_IP": "192.168.200.13", "RAY_AUTH_MODE": "disabled"}},
		{name: "token authentication", s: Spec{AuthToken: true},
			want: map[string]string{"RAY_AUTH_MODE": "token"}},
		// Declared without authentication, said so: Ray 2.60's head would
		// otherwise turn token mode on over a leftover ~/.ray/auth_token.
		// Each node names its own fabric port.
		{name: "the node's interface", node: NodeSpec{Name: "spark2", Interface: "enp1s0f1np1"}, registeredIP: "192.168.200.13",
			s: Spec{Env: map[string]string{"A": "1"}},
			want: map[string]string{"A": "1", "VLLM_HOST_IP": "192.168.200.13", "RAY_AUTH_MODE": "disabled",
				"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "GLOO_SOCKET_IFNAME": "enp1s0f1np1"}},
		{name: "authentication disabled", s: Spec{Env: map[string]string{"RAY_AUTH_MODE": "token"}},
			want: map[string]string{"RAY_AUTH_MODE": "disabled"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := maps.Clone(c.s.Env)
			got := startEnv(c.s, c.node, c.registeredIP)
			if !maps.Equal(got, c.want) {
				t.Fatalf("env = %v, want %v", got, c.want)
			}
			if !maps.Equal(c.s.Env, before) {
				t.Fatalf("the spec's env was changed: %v", c.s.Env)
			}
		})
	}
}

func TestStartOptions(t *testing.T) {
	s := Spec{GCSPort: 6379, DashboardHost: "127.0.0.1", StartArgs: []string{"--block"}}
	head, step := startOptions(s, NodeSpec{Name: HeadName, NodeIP: "192.168.200.12"}, "ignored", nil)
	if step != "start Ray head" || !head.Head || head.GCSPort != 6379 || head.DashboardHost != "127.0.0.1" ||
		head.HeadAddress != "" || head.NodeIP != "192.168.200.12" || head.RayCommand != "ray" || len(head.ExtraArgs) != 1 {
		t.Fatalf("head: %q %+v", step, head)
	}
	for headIP, addr := range map[string]string{"192.168.200.12": "192.168.200.12:6379", "fd00::1": "[fd00::1]:6379"} {
		w, step := startOptions(s, NodeSpec{Name: "spark2"}, headIP, nil)
		if step != "start Ray worker spark2" || w.Head || w.GCSPort != 0 || w.DashboardHost != "" || w.HeadAddress != addr {
			t.Fatalf("worker joining %s: %q %+v", headIP, step, w)
		}
	}
}

func TestCheckRegistered(t *testing.T) {
	want := map[string]string{HeadName: "192.168.200.12", "spark2": "192.168.200.13"}
	hostnames := map[string]string{HeadName: "spark1", "spark2": "spark2"}
	head := ray.Node{Alive: true, IP: "192.168.200.12", Hostname: "spark1"}
	for _, c := range []struct {
		name      string
		nodes     []ray.Node
		hostnames map[string]string
		stale     map[string]bool
		missing   string
		wrongGot  string // the IP a wrong registration names; "" none
	}{
		{name: "every node alive under its IP", nodes: []ray.Node{head, {Alive: true, IP: "192.168.200.13", Hostname: "spark2"}}, hostnames: hostnames},
		{name: "worker not registered yet", nodes: []ray.Node{head}, hostnames: hostnames, missing: "spark2"},
		{name: "worker under another IP", nodes: []ray.Node{head, {Alive: true, IP: "10.1.230.181", Hostname: "spark2"}},
			hostnames: hostnames, missing: "spark2", wrongGot: "10.1.230.181"},
		{name: "a dead row under another IP is not a verdict", nodes: []ray.Node{head, {IP: "10.1.230.181", Hostname: "spark2"}},
			hostnames: hostnames, missing: "spark2"},
		{name: "another IP, hostname unknown: wait", nodes: []ray.Node{head, {Alive: true, IP: "10.1.230.181", Hostname: "spark2"}},
			hostnames: map[string]string{}, missing: "spark2"},
		{name: "its IP, but not alive", nodes: []ray.Node{head, {IP: "192.168.200.13", Hostname: "spark2"}}, hostnames: hostnames, missing: "spark2"},
		// The worker this update stopped by SIGKILL (its container
		// removed) is listed alive until the GCS's health checks fail: it
		// is not the worker registering again.
		{name: "only the stopped incarnation, listed alive", nodes: []ray.Node{head, {ID: "old", Alive: true, IP: "192.168.200.13", Hostname: "spark2"}},
			hostnames: hostnames, stale: map[string]bool{"old": true}, missing: "spark2"},
		{name: "the stopped incarnation beside the new one", nodes: []ray.Node{head, {ID: "old", Alive: true, IP: "192.168.200.13", Hostname: "spark2"},
			{ID: "new", Alive: true, IP: "192.168.200.13", Hostname: "spark2"}}, hostnames: hostnames, stale: map[string]bool{"old": true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			missing, wrong := checkRegistered(ray.Table{GCSUp: true, Nodes: c.nodes}, want, c.hostnames, c.stale)
			if missing != c.missing {
				t.Errorf("missing = %q, want %q", missing, c.missing)
			}
			switch {
			case c.wrongGot == "" && wrong != nil:
				t.Errorf("unexpected %v", wrong)
			case c.wrongGot != "" && (wrong == nil || wrong.Node != "spark2" || wrong.Want != "192.168.200.13" || len(wrong.Got) != 1 || wrong.Got[0] != c.wrongGot):
				t.Errorf("wrong = %+v, want spark2 registered as %s", wrong, c.wrongGot)
			}
		})
	}
}
