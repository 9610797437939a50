// Package mpdeploy plans, launches, reads and stops one vLLM deployment
// served across nodes by vLLM's own multiprocessing executor, with no Ray
// (internal/mpplan has its command lines and rules). It holds no
// Terraform: the spark_vllm_mp_deployment resource turns its model into a
// Spec and the results back into state, as spark_vllm_deployment does with
// internal/vllmdeploy.
package mpdeploy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/mpplan"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/supervise"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
)

// Spec is one deployment, as plain values.
type Spec struct {
	mpplan.Spec
	// Endpoints is how each node is reached over SSH, by node name.
	Endpoints   map[string]transport.Endpoint
	Env         map[string]string // the user's env, on every node
	VLLMCommand string            // "": vllm on the PATH
	APIKeyFile  string            // on rank 0's node; "": none
	// SecretsVersion is api_key_wo_version and secret_env_wo_version: a new
	// one restarts the set with the new values (the values are never in a
	// Spec, so never in state).
	SecretsVersion [2]int64
}

// Secrets are the write-only values: never in a Spec, so never in state.
type Secrets struct {
	APIKey string            // rank 0's VLLM_API_KEY
	Env    map[string]string // on every node
}

// Served is the name clients ask for.
func (s Spec) Served() string { return vllm.ServedName(s.ServedName, s.Model) }

// Manager does the work; one per provider process.
type Manager struct {
	Pool *transport.Pool
}

// stopGrace is how long a rank gets to end after SIGTERM.
const stopGrace = 10 * time.Second

// rank is node n's vLLM as package vllm drives it: rank 0 serves the API
// port; the others serve none. Each node keeps the deployment in a
// directory named after rank 0's address and port, the deployment's one
// unique name, so a node can run ranks of several deployments.
func (s Spec) rank(pool *transport.Pool, n mpplan.Node) vllm.Server {
	srv := vllm.Server{Node: transport.Node{Pool: pool, Endpoint: s.Endpoints[n.Name]},
		Key: fmt.Sprintf("mp-%s-%d", s.Nodes[0].NodeIP, s.Port), Restart: s.Restart}
	if n.Rank == 0 {
		srv.Port, srv.Host = s.Port, s.Host
	}
	if srv.Supervised() && len(s.Nodes) > 1 {
		srv.Watch = s.watch(n)
	}
	return srv
}

// watch is node n's rank set watch (vllm.WatchScript): rank 0 holds a
// connection to each other node's, at the master port on its node_ip;
// every other rank to rank 0's store, and listens for rank 0's.
func (s Spec) watch(n mpplan.Node) []string {
	port := strconv.Itoa(s.MasterPort)
	if n.Rank != 0 {
		return []string{"headless", port, "-", "-", s.Master(), n.NodeIP}
	}
	api := "127.0.0.1"
	if a, err := netip.ParseAddr(s.Host); err == nil && !a.IsUnspecified() {
		api = s.Host
	}
	out := []string{"rank0", port, api, strconv.Itoa(s.Port)}
	for _, o := range s.Nodes[1:] {
		out = append(out, o.NodeIP)
	}
	return out
}

func nodeFailed(n mpplan.Node, summary string, err error) finding.Finding {
	return finding.Finding{Path: finding.Attr("nodes").Key(n.Name), Node: n.Name, Summary: summary, Detail: err.Error()}
}

// Known says every value the checks need is known (at plan, a value from
// a resource not created yet is not).
func (s Spec) Known() bool {
	if s.Model == "" || len(s.Nodes) == 0 {
		return false
	}
	for _, n := range s.Nodes {
		if n.NodeIP == "" || s.Endpoints[n.Name].Host == "" {
			return false
		}
	}
	return true
}

// Check reads every node at once and runs mpplan's rules. ours says this
// deployment runs now (its ports are its own). version is vLLM's on rank
// 0's node ("" unread).
func (m *Manager) Check(ctx context.Context, s Spec, ours bool) (version string, found []finding.Finding) {
	if shape := mpplan.CheckShape(s.Spec); len(shape) > 0 {
		return "", shape
	}
	seen, left, found := m.read(ctx, s)
	if !ours {
		var f []finding.Finding
		ours, f = unfinished(s, left)
		found = append(found, f...)
	}
	found = append(found, mpplan.Check(s.Spec, seen, ours)...)
	found = append(found, mpplan.FabricLinks(s.Spec, s.Env, seen)...)
	return seen[s.Nodes[0].Name].Facts.VLLMVersion, append(found, mpplan.MemoryFit(s.Spec, s.Env, seen, ours)...)
}

// unfinished judges the ranks of this deployment that an apply started and
// never saw ready (their start marker is still there: the apply was
// killed), as read with the node's facts. Such ranks are this deployment's
// own, which the next apply stops before it starts the set (Launch), so
// they never need a hand on the node; ours says rank 0 is one of them, so
// the ports it holds are the deployment's own. A launch still in progress
// (another apply holds its lock) is refused.
func unfinished(s Spec, left map[string]leftover) (ours bool, found []finding.Finding) {
	for _, n := range s.Nodes {
		l := left[n.Name]
		switch {
		case l.identity == "":
		case l.launching:
			found = append(found, finding.Finding{Path: finding.Attr("nodes").Key(n.Name), Node: n.Name,
				Summary: "Another apply is launching this deployment",
				Detail: fmt.Sprintf("%s is starting rank %d on %s (process %s) and holds its launch lock. Wait for it to finish, then plan again.",
					l.holder, n.Rank, n.Name, l.identity)})
		default:
			ours = ours || n.Rank == 0
			found = append(found, finding.Finding{Warning: true, Path: finding.Attr("nodes").Key(n.Name), Node: n.Name,
				Summary: "An interrupted apply left a rank running",
				Detail: fmt.Sprintf("Rank %d on %s (process %s), started by %s, never answered its readiness check: that apply was "+
					"interrupted. The apply stops it before it starts the set.", n.Rank, n.Name, l.identity, l.holder)})
		}
	}
	return ours, found
}

// read reads every node at once, one round trip each: its facts, and any
// rank of this deployment an interrupted apply left there.
func (m *Manager) read(ctx context.Context, s Spec) (map[string]mpplan.Seen, map[string]leftover, []finding.Finding) {
	var mu sync.Mutex
	seen, left := map[string]mpplan.Seen{}, map[string]leftover{}
	var found []finding.Finding
	var wg sync.WaitGroup
	for _, n := range s.Nodes {
		wg.Go(func() {
			argv := transport.Script(FactsScript, s.VLLMCommand, s.Master(), s.Model, portsArg(s.Ports(n)),
				strings.Join(s.Peers(n), " "), s.rank(m.Pool, n).Key, s.rank(m.Pool, n).Private())
			res, err := m.Pool.Run(ctx, s.Endpoints[n.Name], transport.Cmd{Step: "read the node", Argv: argv})
			var sn mpplan.Seen
			var l leftover
			if err == nil {
				sn, l, err = ParseFacts(string(res.Stdout), s.Ports(n))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				found = append(found, nodeFailed(n, "Cannot read node "+n.Name, err))
				return
			}
			seen[n.Name], left[n.Name] = sn, l
		})
	}
	wg.Wait()
	slices.SortFunc(found, func(a, b finding.Finding) int { return strings.Compare(a.Node, b.Node) })
	return seen, left, found
}

// env is node n's environment: the user's, its secret env over it, then
// what the mode needs, which wins.
func (s Spec) env(n mpplan.Node, secret map[string]string) map[string]string {
	env := map[string]string{}
	maps.Copy(env, s.Env)
	maps.Copy(env, secret)
	maps.Copy(env, s.Spec.Env(n))
	return env
}

// Launch checks again, then starts every rank (rank 0 first: it binds the
// store the others dial; then the headless ranks) and waits until rank 0
// answers a completion. On any failure it stops every rank it started and
// reports the failing ranks' log tails: nothing is left running. It
// returns each node's process identity.
func (m *Manager) Launch(ctx context.Context, s Spec, sec Secrets) (map[string]string, []finding.Finding) {
	apiKey := sec.APIKey
	_, found := m.Check(ctx, s, false)
	if hasError(found) {
		return nil, found
	}
	ids := map[string]string{}
	var started []mpplan.Node
	fail := func(f finding.Finding) (map[string]string, []finding.Finding) {
		f.Detail += m.logTails(context.WithoutCancel(ctx), s, started)
		m.stopAll(context.WithoutCancel(ctx), s, ids)
		return nil, append(found, f)
	}
	dirs, unlock, f := m.lockAll(ctx, s)
	defer unlock()
	if f != nil {
		return fail(*f)
	}
	for _, n := range s.Nodes {
		env, keyFile := s.rankEnv(n, sec)
		id, err := s.rank(m.Pool, n).Launch(ctx, dirs[n.Name], env, keyFile, raycluster.Holder(), s.Argv(s.VLLMCommand, n))
		if err != nil {
			return fail(nodeFailed(n, "Cannot launch vLLM rank "+fmt.Sprint(n.Rank)+" on "+n.Name, err))
		}
		ids[n.Name] = id
		started = append(started, n)
		tflog.Info(ctx, "vLLM rank launched", map[string]any{"node": n.Name, "rank": n.Rank, "process": id})
	}
	rank0 := s.rank(m.Pool, s.Nodes[0])
	if apiKey == "" && s.APIKeyFile != "" {
		key, err := rank0.ReadKeyFile(ctx, s.APIKeyFile)
		if err != nil {
			return fail(finding.Finding{Path: finding.Attr("api_key_file"), Summary: "Cannot read api_key_file", Detail: err.Error()})
		}
		apiKey = key
	}
	if err := m.awaitReady(ctx, s, ids, apiKey); err != nil {
		return fail(finding.Finding{Summary: "vLLM did not become ready", Detail: err.Error()})
	}
	for _, n := range s.Nodes {
		_ = s.rank(m.Pool, n).Settled(ctx)
	}
	tflog.Info(ctx, "vLLM ready across nodes", map[string]any{"node": rank0.Node.Addr(), "nodes": len(s.Nodes)})
	return ids, found
}

// lockAll takes each node's launch lock for this deployment (one launch at
// a time: another apply finds a lock held and is refused) and stops the
// ranks an interrupted apply left, so the set starts whole. It returns
// each node's deployment directory, and unlock, which releases every lock
// taken.
func (m *Manager) lockAll(ctx context.Context, s Spec) (map[string]string, func(), *finding.Finding) {
	dirs := map[string]string{}
	var unlocks []func()
	unlock := func() {
		for _, u := range unlocks {
			u()
		}
	}
	for _, n := range s.Nodes {
		srv := s.rank(m.Pool, n)
		dir, u, err := srv.LockLaunch(ctx)
		if err != nil {
			f := nodeFailed(n, "Cannot take the vLLM launch lock on "+n.Name, err)
			return nil, unlock, &f
		}
		unlocks = append(unlocks, u)
		if id, _, _, err := srv.Unfinished(ctx); err == nil && id != "" {
			// A killed apply's rank: ours (our private directory).
			_ = srv.Stop(ctx, id, stopGrace)
		}
		dirs[n.Name] = dir
	}
	return dirs, unlock, nil
}

// rankEnv is node n's environment and API key file: the API key reaches
// rank 0 only, in its 0600 environment file (or read there from
// api_key_file), never an argv.
func (s Spec) rankEnv(n mpplan.Node, sec Secrets) (env map[string]string, keyFile string) {
	env = s.env(n, sec.Env)
	if n.Rank != 0 {
		return env, ""
	}
	if sec.APIKey != "" {
		env["VLLM_API_KEY"] = sec.APIKey
	}
	return env, s.APIKeyFile
}

// awaitReady waits for rank 0's readiness, and gives up as soon as any
// headless rank dies: rank 0 would otherwise wait for it until vLLM's own
// timeout.
func (m *Manager) awaitReady(ctx context.Context, s Spec, ids map[string]string, apiKey string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		t := time.NewTicker(3 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, n := range s.Nodes[1:] {
				if alive, err := s.rank(m.Pool, n).Alive(ctx, ids[n.Name]); err == nil && !alive {
					cancel(fmt.Errorf("rank %d on node %s exited while rank 0 was starting", n.Rank, n.Name))
					return
				}
			}
		}
	}()
	rank0 := s.rank(m.Pool, s.Nodes[0])
	err := rank0.Ready(ctx, s.Served(), apiKey, ids[s.Nodes[0].Name], nil)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err != nil {
		return fmt.Errorf("rank 0 on %s: %w", s.Nodes[0].Name, err)
	}
	run, err := rank0.Find(ctx)
	if err != nil {
		return fmt.Errorf("cannot tell which process answered on port %d: %w", s.Port, err)
	}
	if run.Identity != ids[s.Nodes[0].Name] {
		return fmt.Errorf("port %d answered, but from process %s, not the rank 0 this apply started (%s)", s.Port, run.Identity, ids[s.Nodes[0].Name])
	}
	return nil
}

// logTails is the last lines of each started rank's log, for a failure's
// detail.
func (m *Manager) logTails(ctx context.Context, s Spec, started []mpplan.Node) string {
	var b strings.Builder
	for _, n := range started {
		p, tail := s.rank(m.Pool, n).LogTail(ctx, 25)
		fmt.Fprintf(&b, "\n\nLast 25 lines of rank %d's log on %s (%s):\n%s", n.Rank, n.Name, p, tail)
	}
	return b.String()
}

// stopAll stops every rank in ids, rank 0 first (its API stops taking
// requests before its workers go).
func (m *Manager) stopAll(ctx context.Context, s Spec, ids map[string]string) []finding.Finding {
	var found []finding.Finding
	for _, n := range s.Nodes {
		id := ids[n.Name]
		if id == "" {
			continue
		}
		if err := s.rank(m.Pool, n).Stop(ctx, id, stopGrace); err != nil {
			found = append(found, nodeFailed(n, "Cannot stop vLLM rank "+fmt.Sprint(n.Rank)+" on "+n.Name, err))
		}
	}
	return found
}

// Stop stops every rank; a rank no longer running is already stopped.
func (m *Manager) Stop(ctx context.Context, s Spec, ids map[string]string) []finding.Finding {
	return m.stopAll(ctx, s, ids)
}

// The states Status reports.
const (
	Serving = "serving"
	// Busy: every rank runs but rank 0's /health gave no answer in time.
	Busy = "busy"
)

// Status reads every rank: Serving when each runs and rank 0's /health
// answers; otherwise what was found, naming the ranks ("rank 1 on spark2
// stopped"), which the plan shows as drift that the apply repairs by
// restarting the whole set. A supervised rank is read through systemd
// (supervise.Judge): its unit changed, removed, disabled, failed or
// between two tries is drift too; one systemd restarted runs, under a new
// identity, which now has (ids otherwise), and a warning says when and
// why.
func (m *Manager) Status(ctx context.Context, s Spec, ids map[string]string) (string, map[string]string, []finding.Finding) {
	var mu sync.Mutex
	var down []string
	var found []finding.Finding
	now := maps.Clone(ids)
	health := vllm.HealthOK
	var wg sync.WaitGroup
	for _, n := range s.Nodes {
		wg.Go(func() {
			rr := m.readRank(ctx, s, n, ids[n.Name])
			mu.Lock()
			defer mu.Unlock()
			switch {
			case rr.err != nil:
				found = append(found, nodeFailed(n, "Cannot read vLLM rank "+fmt.Sprint(n.Rank)+" on "+n.Name, rr.err))
				return
			case rr.Drift != "":
				down = append(down, rr.Drift)
			case !rr.alive:
				down = append(down, fmt.Sprintf("rank %d on %s stopped", n.Rank, n.Name))
			case rr.health == vllm.HealthBad || health == vllm.HealthOK:
				health = rr.health
			}
			if rr.Restarted != "" {
				now[n.Name] = rr.Identity
				found = append(found, finding.Finding{Warning: true, Node: n.Name, Path: finding.Attr("nodes").Key(n.Name),
					Summary: "systemd restarted vLLM since the apply", Detail: rr.Restarted + ". It serves again by itself; nothing to apply."})
			}
		})
	}
	wg.Wait()
	slices.SortFunc(found, func(a, b finding.Finding) int { return strings.Compare(a.Node, b.Node) })
	if hasError(found) {
		return "", nil, found
	}
	slices.Sort(down)
	switch {
	case len(down) > 0:
		return strings.Join(down, ", "), now, found
	case health == vllm.HealthBad:
		return "rank 0 unhealthy", now, found
	case health == vllm.HealthSlow:
		return Busy, now, found
	}
	return Serving, now, found
}

// RepairInPlace repairs, without restarting anything, a set whose only
// drift is in its units: a unit changed or disabled by hand while the
// process the apply started still runs under it (supervise.Verdict.InPlace).
// It writes those units again and reports true. Any other drift (a rank
// stopped, failed or restarted under an edited unit, rank 0 unhealthy), an
// unsupervised set, or a read that fails leaves it to the caller, which
// restarts the set: false, and nothing changed on the nodes.
func (m *Manager) RepairInPlace(ctx context.Context, s Spec, ids map[string]string) bool {
	type rewrite struct {
		srv vllm.Server
		dir string
		id  string
	}
	var todo []rewrite
	for _, n := range s.Nodes {
		srv := s.rank(m.Pool, n)
		if !srv.Supervised() {
			return false
		}
		st, dir, err := srv.UnitStatus(ctx)
		if err != nil {
			return false
		}
		v := supervise.Judge(srv.Unit(dir), st, ids[n.Name], fmt.Sprintf("rank %d on %s", n.Rank, n.Name))
		switch {
		case v.Drift == "" && v.Restarted == "":
		case v.InPlace:
			todo = append(todo, rewrite{srv, dir, ids[n.Name]})
		default:
			return false
		}
	}
	if len(todo) == 0 || s.rank(m.Pool, s.Nodes[0]).Health(ctx) != vllm.HealthOK {
		return false
	}
	for _, r := range todo {
		if id, err := r.srv.Rewrite(ctx, r.dir); err != nil || id != r.id {
			return false // the restart that follows writes every unit anew
		}
	}
	return true
}

// rankRead is what Status read of one rank.
type rankRead struct {
	supervise.Verdict // a supervised rank's: drift, or a restart systemd made
	alive             bool
	health            vllm.Health // rank 0's, when it runs
	err               error
}

// readRank reads one rank: through systemd when supervised
// (supervise.Judge), else its process identity; then rank 0's /health.
func (m *Manager) readRank(ctx context.Context, s Spec, n mpplan.Node, id string) (rr rankRead) {
	srv := s.rank(m.Pool, n)
	rr.health = vllm.HealthOK
	if srv.Supervised() {
		var st supervise.Status
		var dir string
		if st, dir, rr.err = srv.UnitStatus(ctx); rr.err == nil {
			rr.Verdict = supervise.Judge(srv.Unit(dir), st, id, fmt.Sprintf("rank %d on %s", n.Rank, n.Name))
			rr.alive = rr.Drift == ""
		}
	} else {
		rr.alive, rr.err = srv.Alive(ctx, id)
	}
	if rr.err == nil && rr.alive && n.Rank == 0 {
		rr.health = srv.Health(ctx)
	}
	return rr
}

func hasError(ds []finding.Finding) bool {
	return slices.ContainsFunc(ds, func(d finding.Finding) bool { return !d.Warning })
}
