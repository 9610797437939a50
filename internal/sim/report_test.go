package sim_test

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// row is every run of one operation at one size: the median of the
// times, the highest peak RSS, and the counts (the same in every run).
type row struct {
	figures
	runs    int
	wallMin time.Duration
	wallMax time.Duration
}

func median(runs []figures, of func(figures) time.Duration) time.Duration {
	v := make([]time.Duration, len(runs))
	for i, f := range runs {
		v[i] = of(f)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func summarize(runs []figures) row {
	r := row{figures: runs[len(runs)-1], runs: len(runs)}
	r.wall = median(runs, func(f figures) time.Duration { return f.wall })
	r.cpu = median(runs, func(f figures) time.Duration { return f.cpu })
	r.nodesCPU = median(runs, func(f figures) time.Duration { return f.nodesCPU })
	r.wallMin, r.wallMax = runs[0].wall, runs[0].wall
	for _, f := range runs {
		r.peakRSS = max(r.peakRSS, f.peakRSS)
		r.handshakes, r.openConns = max(r.handshakes, f.handshakes), max(r.openConns, f.openConns)
		r.wallMin, r.wallMax = min(r.wallMin, f.wall), max(r.wallMax, f.wall)
	}
	return r
}

func rows() []row {
	reportMu.Lock()
	defer reportMu.Unlock()
	out := make([]row, 0, len(report))
	for _, runs := range report {
		out = append(out, summarize(runs))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].op != out[j].op {
			return out[i].op > out[j].op // "no-change plan" before "create"
		}
		return out[i].nodes < out[j].nodes
	})
	return out
}

// printReport prints every run as one table, what the nodes answered in
// the largest runs, then the targets against what was measured.
func printReport(w io.Writer, rtt, exec time.Duration) {
	rs := rows()
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsimulated nodes (internal/sim), %s round trip, %s per command on the node; medians of %d+ runs; "+
		"CPU and peak RSS are the provider's process (the nodes run in a child)\n",
		rtt, exec, slices.MinFunc(rs, func(a, b row) int { return a.runs - b.runs }).runs)
	const head = "%-15s %5s %7s %13s %6s %7s %8s %7s %6s %6s %7s\n"
	fmt.Fprintf(w, head, "run", "nodes", "wall s", "(min..max)", "CPU s", "CPU ms", "peak RSS", "hand-", "open", "node", "nodes'")
	fmt.Fprintf(w, head, "", "", "", "", "", "/node", "MiB", "shakes", "conns", "cmds", "CPU s")
	for _, r := range rs {
		fmt.Fprintf(w, "%-15s %5d %7.2f (%5.2f..%5.2f) %6.2f %7.2f %8.1f %7d %6d %6d %7.2f\n", r.op, r.nodes, r.wall.Seconds(),
			r.wallMin.Seconds(), r.wallMax.Seconds(), r.cpu.Seconds(), ms(r.cpuPerNode()), mib(r.peakRSS), r.handshakes,
			r.openConns, r.sessions, r.nodesCPU.Seconds())
	}
	printCommands(w, rs)
	printTargets(w, rtt, exec, rs)
}

// printCommands says, for the largest run of each operation, which
// commands the nodes answered and over what span they started: commands
// sent one after another start over about their count times the round
// trips each takes.
func printCommands(w io.Writer, rs []row) {
	largest := map[string]row{}
	for _, r := range rs {
		if r.nodes >= largest[r.op].nodes {
			largest[r.op] = r
		}
	}
	for _, op := range slices.Sorted(maps.Keys(largest)) {
		r := largest[op]
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(r.commands)) {
			c := r.commands[name]
			parts = append(parts, fmt.Sprintf("%s x%d in %.2f s", name, c.Count, c.Span().Seconds()))
		}
		fmt.Fprintf(w, "%s, %d nodes, commands answered (how many, started within): %s\n", op, r.nodes, strings.Join(parts, "; "))
	}
}

// printTargets holds the no-change plan to issue 19's targets: at 256
// nodes with 20 ms round trips, under 5 s wall, under 200 MiB peak RSS,
// one handshake per node, and CPU per node flat (within 1.5x) from 8 to 256.
func printTargets(w io.Writer, rtt, exec time.Duration, rs []row) {
	var plans []row
	for _, r := range rs {
		if r.op == "no-change plan" {
			plans = append(plans, r)
		}
	}
	i := slices.IndexFunc(plans, func(r row) bool { return r.nodes == 256 })
	if i < 0 || rtt != 20*time.Millisecond {
		fmt.Fprintln(w, "targets: they are for a 256-node no-change plan at -sim.rtt 20ms")
		return
	}
	big := plans[i]
	met := func(ok bool) string { return map[bool]string{true: "met", false: "NOT met"}[ok] }
	fmt.Fprintf(w, "targets, no-change plan of 256 nodes, 20 ms round trip, %s per command on the node:\n", exec)
	fmt.Fprintf(w, "  wall under 5 s:          %7.2f s        %s\n", big.wall.Seconds(), met(big.wall < 5*time.Second))
	fmt.Fprintf(w, "  peak RSS under 200 MiB:  %7.1f MiB      %s\n", mib(big.peakRSS), met(big.peakRSS < 200<<20))
	fmt.Fprintf(w, "  handshakes = nodes:      %7d of %d   %s\n", big.handshakes, big.nodes, met(big.handshakes == int64(big.nodes)))
	lo := slices.MinFunc(plans, func(a, b row) int { return int(a.cpuPerNode() - b.cpuPerNode()) })
	hi := slices.MaxFunc(plans, func(a, b row) int { return int(a.cpuPerNode() - b.cpuPerNode()) })
	ratio := float64(hi.cpuPerNode()) / float64(max(lo.cpuPerNode(), 1))
	var each []string
	for _, r := range plans {
		each = append(each, fmt.Sprintf("%d nodes %.2f ms", r.nodes, ms(r.cpuPerNode())))
	}
	fmt.Fprintf(w, "  CPU per node flat, highest/lowest within 1.5x: %s; %.2fx  %s\n", strings.Join(each, ", "), ratio, met(ratio <= 1.5))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func mib(b int64) float64        { return float64(b) / (1 << 20) }
