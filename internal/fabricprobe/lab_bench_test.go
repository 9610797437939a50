package fabricprobe_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lab-infra/terraform-provider-spark/internal/fabricprobe"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// The yardstick is a plain socket copy: 3 GiB sent on one node by a bare
// sendall loop (one 4 MiB buffer, no token, no time box, not through the
// provider), counted on the other by a bare receive loop, timed from its
// first byte to the end, as the probe's receiver times its stream. 3 GiB
// lasts about as long as the probe's 2 s on the lab, so both spend alike in
// TCP's slow start. The sender's buffer is written memory (bytearray), as
// the probe's is: a bytes(n) buffer maps the zero page and reads about 25 %
// faster, from the CPU cache (README, "The fabric between nodes").
// The same 3 GiB written by dd into bash's /dev/tcp is a second reference:
// dd reads /dev/zero into its block before each write.
const plainReceiver = `python3 -c '
import socket, sys, time
s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(1); s.settimeout(20)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); n, t0 = 0, None
buf = bytearray(4 << 20)
while True:
    k = c.recv_into(buf)
    if not k:
        break
    t0 = t0 or time.time()
    n += k
print(n, time.time() - t0, flush=True)
' "$1" > "$2" 2>&1 &
i=0; while [ ! -s "$2" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; head -n 1 "$2"`

const plainSender = `exec python3 -c '
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
buf = memoryview(bytearray(4 << 20))
for _ in range(768):
    s.sendall(buf)
s.close()
' "$1" "$2"`

const ddSender = `exec bash -c 'dd if=/dev/zero bs=4M count=768 2>/dev/null > "/dev/tcp/$0/$1"' "$1" "$2"`

const plainResult = `i=0; while [ "$(wc -l < "$1")" -lt 2 ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done; tail -n 1 "$1"; rm -f "$1"`

// BenchmarkFabricOnLab: the fabric probe (through the provider's own SSH
// pool, as a plan runs it) beside a plain socket copy between the same two
// lab nodes, alternating, 7 rounds; medians and their ratio, dd's figure
// beside. `make bench-fabric` (a lab up: `make lab-up`).
func BenchmarkFabricOnLab(b *testing.B) {
	f, err := lab.Load("../../.lab/lab.json")
	if err != nil {
		b.Fatal(err)
	}
	pool, err := transport.NewPool(transport.Config{User: f.SSHUser, PrivateKeyFile: f.PrivateKeyFile, KnownHostsFile: f.KnownHostsFile,
		ConnectTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	head, w := f.Nodes[0], f.Nodes[1]
	from, to := transport.Endpoint{Host: head.SSHHost, Port: head.SSHPort}, transport.Endpoint{Host: w.SSHHost, Port: w.SSHPort}
	run := func(e transport.Endpoint, script string, args ...string) string {
		res, err := pool.Run(ctx, e, transport.Cmd{Step: "bench", Argv: transport.Script(script, args...)})
		if err != nil {
			b.Fatal(err)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	copyGbps := func(sender string) float64 {
		out := fmt.Sprintf("/tmp/spark-bench-plain-%d", time.Now().UnixNano())
		port := run(to, plainReceiver, w.FabricIP, out)
		run(from, sender, w.FabricIP, port)
		fields := strings.Fields(run(to, plainResult, out))
		if len(fields) != 2 {
			b.Fatalf("plain copy: %v", fields)
		}
		n, _ := strconv.ParseFloat(fields[0], 64)
		secs, _ := strconv.ParseFloat(fields[1], 64)
		return n * 8 / secs / 1e9
	}
	var probe, plain, dd []float64
	for range 7 {
		g, err := fabricprobe.Run(ctx, pool, from, to, w.FabricIP)
		if err != nil {
			b.Fatal(err)
		}
		probe = append(probe, g)
		plain = append(plain, copyGbps(plainSender))
		dd = append(dd, copyGbps(ddSender))
	}
	mp, mc, md := median(probe), median(plain), median(dd)
	b.ReportMetric(mp, "probe_Gb/s")
	b.ReportMetric(mc, "plain_Gb/s")
	b.ReportMetric(mp/mc, "probe/plain")
	fmt.Printf("\nfabric %s -> %s (%s -> %s), 7 rounds alternating\n", head.Name, w.Name, head.FabricIP, w.FabricIP)
	fmt.Printf("| figure | median | min..max |\n|---|---|---|\n")
	fmt.Printf("| fabric_probe (one TCP stream, 2 s) | %.2f Gb/s | %.2f..%.2f |\n", mp, slices.Min(probe), slices.Max(probe))
	fmt.Printf("| plain socket copy (sendall 3 GiB) | %.2f Gb/s | %.2f..%.2f |\n", mc, slices.Min(plain), slices.Max(plain))
	fmt.Printf("| dd 3 GiB into /dev/tcp (reference) | %.2f Gb/s | %.2f..%.2f |\n", md, slices.Min(dd), slices.Max(dd))
	fmt.Printf("| probe / plain | %.2f | target 0.80..1.20 |\n", mp/mc)
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
