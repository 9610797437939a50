package fabric

import (
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
)

func end(node, ip, port string, mtu, speed int, up bool, rdma ...string) End {
	return End{Node: node, IP: ip, Facts: nodefacts.Facts{Interfaces: []nodefacts.Interface{
		{Name: "lo", Up: true, MTU: 65536, Addresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}},
		{Name: port, Up: up, MTU: mtu, SpeedMbps: speed, RDMA: rdma, Addresses: []netip.Prefix{netip.MustParsePrefix(ip + "/24")}}}}}
}

func TestCheckPair(t *testing.T) {
	spark := func(node, ip, port, dev string, mtu int) End { return end(node, ip, port, mtu, 200000, true, dev) }
	a, b := spark("head", "192.168.100.10", "enp1s0f0np0", "rocep1s0f0", 9000), spark("w", "192.168.100.11", "enp1s0f1np1", "rocep1s0f1", 9000)
	cases := []struct {
		name string
		a, b End
		env  map[string]string
		want string
	}{
		{"a DGX Spark pair, two different ports", a, b, nil, ""},
		{"NCCL_IB_HCA covering both", a, b, map[string]string{"NCCL_IB_HCA": "rocep1s0f0,rocep1s0f1"}, ""},
		{"NCCL_IB_HCA a prefix", a, b, map[string]string{"NCCL_IB_HCA": "rocep"}, ""},
		{"NCCL_IB_HCA naming the head's port only (one half)", a, b, map[string]string{"NCCL_IB_HCA": "=rocep1s0f0:1"},
			"w:w:NCCL_IB_HCA leaves out the fabric port's RDMA device"},
		{"NCCL_IB_HCA excluding one", a, b, map[string]string{"NCCL_IB_HCA": "^rocep1s0f1"}, "w:w:NCCL_IB_HCA leaves out the fabric port's RDMA device"},
		{"MTU 9000 against 1500", a, spark("w", "192.168.100.11", "enp1s0f1np1", "rocep1s0f1", 1500), nil, "w:w:The two ends of the fabric have different MTUs"},
		{"a port at 100G", a, end("w", "192.168.100.11", "enp1s0f1np1", 9000, 100000, true), nil, "w:w:The two ends of the fabric run at different speeds"},
		{"a port down", end("head", "192.168.100.10", "eth1", 1500, 0, false), end("w", "192.168.100.11", "eth1", 1500, 0, true), nil,
			"e:head:The fabric port is down"},
		{"an address on no interface: other rules' business", End{Node: "head", IP: "10.0.0.1"}, b, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, p := range CheckPair(c.a, c.b, c.env) {
				got = append(got, map[bool]string{true: "w:", false: "e:"}[p.Warning]+p.Node+":"+p.Summary)
				if !strings.Contains(p.Detail, p.Node) {
					t.Errorf("the detail does not name the node: %s", p.Detail)
				}
			}
			if g := strings.Join(got, "|"); g != c.want {
				t.Errorf("got %q, want %q", g, c.want)
			}
		})
	}
}

func TestHCAUses(t *testing.T) {
	for _, c := range []struct {
		hca, dev string
		want     bool
	}{
		{"mlx5", "mlx5_0", true}, {"mlx5_0:1", "mlx5_0", true}, {"=mlx5_0", "mlx5_0", true}, {"=mlx5", "mlx5_0", false},
		{"mlx5_1", "mlx5_0", false}, {"^mlx5_0", "mlx5_0", false}, {"^mlx5_0", "mlx5_1", true}, {"^=mlx5", "mlx5_1", true},
		{"mlx5_2, rocep1s0f0", "rocep1s0f0", true},
	} {
		if got := HCAUses(c.hca, c.dev); got != c.want {
			t.Errorf("HCAUses(%q, %q) = %v", c.hca, c.dev, got)
		}
	}
}

// The probe's three scripts, run by /bin/sh on this machine over loopback:
// a figure with the token, a refusal without it.
func TestProbeOverLoopback(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed (the nodes run the probe with it)")
	}
	run := func(script, stdin string, args ...string) string {
		cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return string(out)
	}
	probe := func(senderToken string) (float64, error) {
		port, dir, err := ParseReceiver(run(ReceiverScript, "s3cret\n", "127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", SenderScript, "sh", "127.0.0.1", itoa(port), "0.3")
		cmd.Stdin = strings.NewReader(senderToken + "\n")
		_ = cmd.Run() // without the token the receiver closes on the sender
		return ParseResult(run(ResultScript, "", dir))
	}
	gbps, err := probe("s3cret")
	if err != nil || gbps <= 0 {
		t.Fatalf("loopback: %v Gb/s, %v", gbps, err)
	}
	if _, err := probe("guess"); err == nil || !strings.Contains(err.Error(), "without the token") {
		t.Fatalf("a sender without the token: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestParse(t *testing.T) {
	if g, err := ParseResult("@@result ok 2500000000 2.0\n"); err != nil || g != 10 {
		t.Errorf("%v %v", g, err)
	}
	if _, err := ParseResult("@@result error no sender within 10 s\n"); err == nil || !strings.Contains(err.Error(), "no sender") {
		t.Error(err)
	}
	if _, _, err := ParseReceiver("@@probe 0 /tmp/x\n"); err == nil {
		t.Error("port 0 accepted")
	}
}
