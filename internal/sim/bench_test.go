package sim_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lab-infra/terraform-provider-spark/internal/sim"
)

// The scale bench: `make bench-sim`, or
//
//	go test -run '^$' -bench BenchmarkSimulated -benchtime 1x ./internal/sim/ -args -sim.nodes 8,64,256 -sim.rtt 20ms
//
// The nodes run in a child process (this test binary again), so this
// process's CPU time and peak RSS are the provider's (and the few
// protocol calls that play Terraform), not the simulated nodes'.
var (
	simNodes = flag.String("sim.nodes", "8,64,256", "cluster sizes to simulate (head included), comma-separated")
	simRTT   = flag.Duration("sim.rtt", 20*time.Millisecond, "round-trip time between the provider and every simulated node")
	simExec  = flag.Duration("sim.exec", 0, "time every command takes on a simulated node before it answers")
)

func TestMain(m *testing.M) {
	if sim.IsChild() {
		if err := sim.ServeChild(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	printReport(os.Stdout, *simRTT, *simExec)
	os.Exit(code)
}

func nodeCounts(b *testing.B) []int {
	var out []int
	for _, s := range strings.Split(*simNodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("-sim.nodes %q: want cluster sizes such as 8,64,256", *simNodes)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkSimulatedPlan is a no-change `terraform plan` of a running
// cluster of n nodes (head and n-1 workers): a fresh provider (Terraform
// starts one per command) configures, validates, upgrades the stored
// state, refreshes it and plans. The cluster is created first, untimed, by
// the provider itself, so the state is what an apply would have left.
func BenchmarkSimulatedPlan(b *testing.B) {
	for _, n := range nodeCounts(b) {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			env := newBenchEnv(b, n)
			st := env.create(b)
			for range b.N {
				env.measure(b, "no-change plan", func(ctx context.Context, w *walks) error {
					tf, err := w.provider(ctx)
					if err != nil {
						return err
					}
					p, err := tf.Plan(ctx, sim.ClusterType, env.config, st)
					if err == nil && p.Changes() != "" {
						err = fmt.Errorf("the plan of the running cluster changes:\n%s", p.Changes())
					}
					return err
				})
			}
		})
	}
}

// BenchmarkSimulatedCreate is `terraform apply` of the same cluster from
// nothing: the plan walk, then the apply walk (its own plan, then the
// create: lock every node, start the head, the token, start every worker,
// wait until all registered), each with its provider. Each run gets fresh
// nodes, started untimed.
func BenchmarkSimulatedCreate(b *testing.B) {
	for _, n := range nodeCounts(b) {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				env := newBenchEnv(b, n)
				b.StartTimer()
				env.measure(b, "create", env.createCluster)
				b.StopTimer()
				env.close(b)
				b.StartTimer()
			}
		})
	}
}

// benchEnv is one simulated cluster and the provider configuration that
// reaches it.
type benchEnv struct {
	nodes       int
	remote      *sim.Remote
	providerCfg map[string]any
	config      map[string]any
	closed      bool
}

func newBenchEnv(b *testing.B, n int) *benchEnv {
	b.Helper()
	key, err := sim.NewClientKey()
	if err != nil {
		b.Fatal(err)
	}
	r, err := sim.Spawn(sim.Options{Nodes: n, RTT: *simRTT, Exec: *simExec, ClientKey: key.Authorized})
	if err != nil {
		b.Fatal(err)
	}
	env := &benchEnv{nodes: n, remote: r, config: sim.ClusterConfig(r.Endpoints())}
	b.Cleanup(func() { env.close(b) })
	kh := filepath.Join(b.TempDir(), "known_hosts")
	if err := sim.WriteKnownHosts(kh, r.Endpoints()); err != nil {
		b.Fatal(err)
	}
	env.providerCfg = sim.ProviderConfig(key, kh)
	return env
}

func (e *benchEnv) close(b *testing.B) {
	if e.closed {
		return
	}
	e.closed = true
	if err := e.remote.Close(); err != nil {
		b.Errorf("the simulated nodes' process: %v", err)
	}
}

// createCluster is `terraform apply` from nothing, as Terraform runs it:
// a plan walk and an apply walk, each with a provider of its own.
func (e *benchEnv) createCluster(ctx context.Context, w *walks) error {
	tf, err := w.provider(ctx)
	if err != nil {
		return err
	}
	if err := tf.PlanCreate(ctx, sim.ClusterType, e.config); err != nil {
		return err
	}
	tf.Close() // the plan walk's provider exits
	if tf, err = w.provider(ctx); err != nil {
		return err
	}
	_, err = tf.ApplyCreate(ctx, sim.ClusterType, e.config)
	return err
}

// create creates the cluster with a provider of its own, untimed.
func (e *benchEnv) create(b *testing.B) sim.State {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	tf, err := sim.NewTerraform(ctx, e.providerCfg)
	if err != nil {
		b.Fatal(err)
	}
	defer tf.Close()
	st, err := tf.ApplyCreate(ctx, sim.ClusterType, e.config)
	if err != nil {
		b.Fatalf("create the cluster to plan: %v", err)
	}
	return st
}
