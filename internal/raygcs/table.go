package raygcs

import (
	"strconv"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// DriversOn is the driver pids, on host, of the jobs that created the
// placement groups: whose parent process names who holds the GPUs.
func (r Reading) DriversOn(host string) []int64 {
	var pids []int64
	seen := map[int64]bool{}
	for _, g := range r.Groups {
		j, ok := r.Jobs[g.CreatorJob]
		if ok && j.DriverIP == host && j.DriverPID > 0 && !seen[j.DriverPID] {
			seen[j.DriverPID] = true
			pids = append(pids, j.DriverPID)
		}
	}
	return pids
}

// Table is the reading as ray.NodesScript would have printed it, placement
// groups named by who created them. parents maps a driver pid on host to
// its parent process (ParseParents): vLLM's driver is its EngineCore,
// whose parent is the `vllm serve` an operator recognises.
func (r Reading) Table(host string, parents map[int64]Parent) ray.Table {
	t := ray.Table{GCSUp: true, RayVersion: r.RayVersion, Nodes: r.Nodes, PlacementGroups: []ray.PlacementGroup{}}
	for _, g := range r.Groups {
		pg := g.PlacementGroup
		pg.Holder = "job " + g.CreatorJob
		if j, ok := r.Jobs[g.CreatorJob]; ok {
			pg.Holder = r.holder(j, host, parents)
		}
		t.PlacementGroups = append(t.PlacementGroups, pg)
	}
	return t
}

// holder says who a job is: its entrypoint (setproctitle pads vLLM's with
// ""), or the `vllm serve` that started its driver on host.
func (r Reading) holder(j Job, host string, parents map[int64]Parent) string {
	var words []string
	for _, w := range strings.Fields(j.Entrypoint) {
		if w != `""` {
			words = append(words, w)
		}
	}
	what := strings.Join(words, " ")
	if what == "" {
		what = "job " + j.ID
	}
	if p, ok := parents[j.DriverPID]; ok && j.DriverIP == host && strings.Contains(p.Cmdline, " serve ") {
		what = p.Cmdline + " (pid " + strconv.FormatInt(p.PID, 10) + ")"
	}
	return what + ", driver pid " + strconv.FormatInt(j.DriverPID, 10) + " on " + j.DriverIP
}

// Parent is a driver's parent process.
type Parent struct {
	PID     int64
	Cmdline string
}

// ParentsScript prints, for each pid in its arguments that still runs,
// "@@parent <pid> <ppid> <parent's command line>": read from /proc, no
// Python. The ppid is the field after the command name in /proc/<pid>/stat,
// whose name may itself hold spaces and parentheses.
const ParentsScript = `for p in "$@"; do
  s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
  pp=$(printf '%s\n' "${s##*) }" | cut -d' ' -f2)
  c=$(tr '\0' ' ' < "/proc/$pp/cmdline" 2>/dev/null) || continue
  printf '@@parent %s %s %s\n' "$p" "$pp" "$c"
done`

// ParseParents reads ParentsScript's output.
func ParseParents(out string) map[int64]Parent {
	parents := map[int64]Parent{}
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "@@parent ")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, " ", 3)
		if len(f) < 3 {
			continue
		}
		pid, err1 := strconv.ParseInt(f[0], 10, 64)
		ppid, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		parents[pid] = Parent{PID: ppid, Cmdline: strings.TrimSpace(f[2])}
	}
	return parents
}
