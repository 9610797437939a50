package sim_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/lab-infra/terraform-provider-spark/internal/sim"
)

var simCPUProfile = flag.String("sim.cpuprofile", "", "write a CPU profile of each measured run to this path prefix (<prefix>-<run>-<nodes>.pprof)")

// figures are one measured run.
type figures struct {
	op              string
	nodes           int
	wall, cpu       time.Duration // cpu: this process, user+sys
	peakRSS         int64         // bytes, this process's VmHWM during the run
	handshakes      int64         // the providers' pools
	openConns       int64         // at the nodes, when the run ended
	sessions        int64         // commands the nodes served
	nodesCPU        time.Duration // the child serving the nodes
	commands        map[string]sim.Command
	nodesHandshakes int64 // as the nodes counted them
}

func (f figures) cpuPerNode() time.Duration { return f.cpu / time.Duration(f.nodes) }

var (
	reportMu sync.Mutex
	report   = map[string][]figures{} // op/nodes -> every run
)

// walks are the provider processes one Terraform command starts, one per
// graph walk: a plan's one; an apply's plan walk, then its apply walk.
type walks struct {
	providerCfg map[string]any
	started     []*sim.Terraform
}

// provider starts a walk's provider.
func (w *walks) provider(ctx context.Context) (*sim.Terraform, error) {
	tf, err := sim.NewTerraform(ctx, w.providerCfg)
	if err == nil {
		w.started = append(w.started, tf)
	}
	return tf, err
}

// handshakes and warnings of every provider started.
func (w *walks) handshakes() (n int64) {
	for _, tf := range w.started {
		n += tf.Pool().Handshakes()
	}
	return n
}

func (w *walks) warnings() (out []string) {
	for _, tf := range w.started {
		out = append(out, tf.Warnings()...)
	}
	return out
}

// closeAll ends every provider, as their processes exiting would.
func (w *walks) closeAll() {
	for _, tf := range w.started {
		tf.Close()
	}
}

// measure runs op and records what it took; the benchmark's own time is
// the same span, from the first provider's start to op's end.
func (e *benchEnv) measure(b *testing.B, op string, run func(context.Context, *walks) error) {
	b.Helper()
	b.StopTimer()
	before := e.stats(b, e.remote.Reset)
	if err := sim.ResetPeakRSS(); err != nil {
		b.Fatal(err)
	}
	stopProfile := startProfile(b, op, e.nodes)
	w := &walks{providerCfg: e.providerCfg}
	defer w.closeAll()
	cpu0, start := must(b, sim.ProcessCPU), time.Now()
	b.StartTimer()
	err := run(context.Background(), w)
	b.StopTimer()
	f := figures{op: op, nodes: e.nodes, wall: time.Since(start), cpu: must(b, sim.ProcessCPU) - cpu0, peakRSS: must(b, sim.PeakRSS)}
	stopProfile()
	if err != nil {
		b.Fatalf("%s of %d nodes: %v", op, e.nodes, err)
	}
	after := e.stats(b, e.remote.Stats)
	if ws := w.warnings(); len(ws) > 0 {
		b.Errorf("%s of a healthy cluster warned:\n%s", op, ws)
	}
	f.handshakes, f.openConns, f.sessions, f.commands = w.handshakes(), after.OpenConns, after.Sessions, after.Commands
	f.nodesCPU, f.nodesHandshakes = after.CPU-before.CPU, after.Handshakes-before.Handshakes
	record(b, f)
	b.StartTimer()
}

// stats asks the nodes what they saw; a command they did not know fails
// the bench, naming it.
func (e *benchEnv) stats(b *testing.B, ask func() (sim.Stats, error)) sim.Stats {
	b.Helper()
	s, err := ask()
	if err != nil {
		b.Fatal(err)
	}
	if s.UnknownCount > 0 {
		b.Fatalf("the provider sent %d commands the simulated nodes do not know, the first: %q", s.UnknownCount, s.Unknown)
	}
	return s
}

// startProfile profiles this process's CPU during one run, when asked.
func startProfile(b *testing.B, op string, nodes int) func() {
	if *simCPUProfile == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s-%s-%d.pprof", *simCPUProfile, op, nodes))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }
}

func must[T any](b *testing.B, f func() (T, error)) T {
	b.Helper()
	v, err := f()
	if err != nil {
		b.Fatal(err)
	}
	return v
}

func record(b *testing.B, f figures) {
	b.ReportMetric(f.wall.Seconds(), "wall-s")
	b.ReportMetric(f.cpu.Seconds(), "cpu-s")
	b.ReportMetric(float64(f.cpuPerNode().Microseconds())/1000, "cpu-ms/node")
	b.ReportMetric(float64(f.peakRSS)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(f.handshakes), "handshakes")
	b.ReportMetric(float64(f.openConns), "open-conns")
	if f.nodesHandshakes != f.handshakes {
		b.Errorf("the pool counted %d handshakes, the nodes %d", f.handshakes, f.nodesHandshakes)
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	key := fmt.Sprintf("%s/%d", f.op, f.nodes)
	report[key] = append(report[key], f)
}
