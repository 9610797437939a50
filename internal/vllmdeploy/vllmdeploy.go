// Package vllmdeploy plans, launches, reads and stops one vLLM deployment
// (`vllm serve` on the head of a Ray cluster) over SSH. It holds no
// Terraform: the spark_vllm_deployment resource turns its model into a Spec
// and the results back into state, as spark_ray_cluster does with
// internal/raycluster. Findings and failures come back as
// finding.Finding values, each naming the attribute it is about.
package vllmdeploy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/inputs"
	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/planmemo"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
)

// Spec is one deployment, as plain values.
type Spec struct {
	Head        transport.Endpoint
	Runtime     nodeexec.Runtime
	RayAddress  string // <head registered ip>:<gcs port>
	Model       string
	ServedName  string // "": the model
	TP, PP      int
	HostIP      string // VLLM_HOST_IP; "": not set
	Port        int
	Host        string // the address vLLM listens on
	APIKeyFile  string // on the head; "": none
	Env         map[string]string
	ExtraArgs   []string
	VLLMCommand string // "": vllm on the PATH
	// Restart: this deployment had a server, which the apply stops first;
	// what its placement groups hold on the head is then freed (Ray drops
	// them as the server's processes end), so the head-GPU rule waits for
	// a first launch.
	Restart bool
}

// Served is the name clients ask for.
func (s Spec) Served() string { return vllm.ServedName(s.ServedName, s.Model) }

func (s Spec) command() string {
	if s.VLLMCommand != "" {
		return s.VLLMCommand
	}
	return "vllm"
}

// cluster is the head as the cluster manager addresses it.
func (s Spec) cluster() raycluster.Spec {
	return raycluster.Spec{Runtime: s.Runtime, Head: raycluster.NodeSpec{Name: raycluster.HeadName, Endpoint: s.Head}}
}

// Secrets are the write-only values: never in a Spec, so never in state.
type Secrets struct {
	APIKey string
	Env    map[string]string
}

// Manager does the work; one per provider process.
type Manager struct {
	Pool     *transport.Pool
	Clusters *raycluster.Manager // shares node-table snapshots and the clusters planned in this run
	Memo     *planmemo.Memo      // what this run's plans concluded: clusters and spark_model directories
}

// server is the head's vllm serve as package vllm drives it.
func (m *Manager) server(ctx context.Context, s Spec) (vllm.Server, error) {
	// Dialled now, so that a head out of reach fails here, before any step.
	if _, err := m.Pool.Get(ctx, s.Head); err != nil {
		return vllm.Server{}, err
	}
	srv := vllm.Server{Node: transport.Node{Pool: m.Pool, Endpoint: s.Head}, Port: s.Port, Host: s.Host}
	if s.Runtime.Container != nil {
		srv.Wrap, srv.WrapIfRunning = s.Runtime.Wrap, s.Runtime.WrapIfRunning
	}
	return srv, nil
}

// where says where commands of this runtime run on a node (rule D11).
func where(rt nodeexec.Runtime) string {
	if rt.Container != nil {
		return "in container " + rt.Container.Name
	}
	return "on the host"
}

func failed(attr finding.Path, summary string, err error) []finding.Finding {
	return []finding.Finding{{Path: attr, Summary: summary, Detail: err.Error()}}
}

var headHost = finding.Attr("head", "ssh_host")

// Check runs the placement rules against the head, as vLLM will see it from
// where it runs, and against Ray's live table — or, on a first plan, against
// what the cluster's plan concluded in this run. own is the GPUs this
// deployment's running server holds (and frees on restart); ownPort says the
// port is held by that server.
func (m *Manager) Check(ctx context.Context, s Spec, own float64, ownPort bool) (preflight.Concluded, []finding.Finding) {
	concluded, found, _ := m.check(ctx, s, own, ownPort)
	return concluded, found
}

// leftover is what check read of an unfinished launch: the identity of its
// server ("" none), or why the marker could not be read.
type leftover struct {
	identity string
	err      error
}

// check is Check, also returning the unfinished launch it read (only when
// ownPort is false), so Launch stops it without reading the marker again.
func (m *Manager) check(ctx context.Context, s Spec, own float64, ownPort bool) (preflight.Concluded, []finding.Finding, leftover) {
	var none preflight.Concluded
	var left leftover
	var unfinished []finding.Finding
	facts, headIP, found := m.readHead(ctx, s)
	if found != nil {
		return none, found, left
	}
	if !ownPort {
		var d *finding.Finding
		left, d = m.unfinishedLaunch(ctx, s)
		switch {
		case d == nil:
		case !d.Warning:
			return none, []finding.Finding{*d}, leftover{}
		default:
			// Its placement group holds GPUs the apply frees by stopping
			// it. How many is not recorded; same user, same port: taken
			// for this deployment's, as it most likely is.
			ownPort, own = true, max(own, float64(s.TP*s.PP))
			unfinished = append(unfinished, *d)
		}
	}
	par, err := vllm.ParseParallel(s.ExtraArgs)
	if err != nil {
		return none, failed(finding.Attr("extra_args"), "Invalid extra_args", err), left
	}
	dep := newDeployment(s, facts, headIP, own, ownPort, par)
	m.addLiveTable(ctx, s, &dep)
	if err := m.addCluster(ctx, s, &dep); err != nil {
		return none, failed(finding.Attr("model"), "Cannot list the model's files on the nodes", err), left
	}
	concluded, found := preflight.CheckDeployment(dep)
	return concluded, append(unfinished, found...), left
}

// readHead reads the head's facts where vllm serve will run: the runtime's
// container (a throwaway one from its image when none runs yet), else the
// host; and the head's IP from ray_address. A failure comes back as the
// diagnostics to report.
func (m *Manager) readHead(ctx context.Context, s Spec) (nodefacts.Facts, string, []finding.Finding) {
	conn, err := m.Pool.Get(ctx, s.Head)
	if err != nil {
		return nodefacts.Facts{}, "", failed(headHost, "Cannot reach the head", err)
	}
	argv := s.Runtime.ProbeArgv(transport.Script(nodefacts.Script, s.Runtime.Ray(), "", "", strconv.Itoa(s.Port), "", s.command()))
	res, err := conn.Run(ctx, transport.Cmd{Step: "read head facts", Argv: argv})
	if err != nil {
		return nodefacts.Facts{}, "", failed(headHost, "Cannot read the head", err)
	}
	facts, err := nodefacts.Parse(string(res.Stdout))
	if err != nil {
		return nodefacts.Facts{}, "", failed(nil, "Cannot read the head", err)
	}
	headIP, _, err := net.SplitHostPort(s.RayAddress)
	if err != nil {
		return nodefacts.Facts{}, "", failed(finding.Attr("ray_address"), "Invalid ray_address",
			fmt.Errorf("ray_address = %q is not <ip>:<port>: use spark_ray_cluster.<name>.head_address", s.RayAddress))
	}
	return facts, headIP, nil
}

// unfinishedLaunch reads whether a launch that never finished holds (or
// will soon hold) the head's port. One still under way, another apply's,
// is refused (an error diagnostic); a server left by one that stopped is
// this provider's own, which the apply replaces (a warning). Neither: no
// diagnostic.
func (m *Manager) unfinishedLaunch(ctx context.Context, s Spec) (leftover, *finding.Finding) {
	var left leftover
	var holder string
	var launching bool
	srv, err := m.server(ctx, s)
	if err == nil {
		left.identity, holder, launching, left.err = srv.Unfinished(ctx)
	} else {
		left.err = err
	}
	switch {
	case left.err != nil:
		return left, nil
	case launching:
		d := anotherLaunch(s, left.identity, holder)
		return left, &d
	case left.identity != "":
		d := leftRunning(s, left.identity, holder)
		return left, &d
	}
	return left, nil
}

// anotherLaunch refuses a plan while another apply (this SSH user, another
// state or workspace) is launching on this head and port: its server is
// loading, and stopping it would throw that load away.
func anotherLaunch(s Spec, identity, holder string) finding.Finding {
	return finding.Finding{Path: finding.Attr("port"), Summary: "Another apply is launching vllm serve on this port",
		Detail: fmt.Sprintf("vllm serve (process %s) is being launched on port %d of %s by %s, which holds the launch lock while "+
			"the model loads. Wait for that apply to finish, or give this deployment another port.", identity, s.Port, s.Head.Host, holder)}
}

// leftRunning warns of the server an interrupted launch left, which the
// apply stops and replaces.
func leftRunning(s Spec, identity, holder string) finding.Finding {
	return finding.Finding{Warning: true, Path: finding.Attr("port"),
		Summary: "An unfinished launch left vllm serve running on the head",
		Detail: fmt.Sprintf("vllm serve (process %s) was launched on port %d by %s, which stopped before it answered "+
			"(killed while the model loaded). It is this provider's own: the apply stops it and starts this deployment's server.",
			identity, s.Port, holder)}
}

// newDeployment is what the placement rules judge, before anything is
// known of the Ray cluster.
func newDeployment(s Spec, facts nodefacts.Facts, headIP string, own float64, ownPort bool, par vllm.Parallel) preflight.Deployment {
	return preflight.Deployment{HeadFacts: facts, HeadName: raycluster.HeadName, SSHHost: s.Head.Host, HeadIP: headIP, HostIP: s.HostIP,
		Env: s.Env, OwnGPUs: own, Port: s.Port, PortIsOwn: ownPort,
		Sizes:         preflight.Sizes{TP: s.TP, PP: s.PP, PCP: par.PCP, DP: par.DP, DPOverRay: par.DPOverRay(), DPAddress: par.DPAddress},
		FailOnEnviron: par.FailOnEnviron, ExtraArgs: s.ExtraArgs, RayAddress: s.RayAddress, Model: s.Model, Restart: s.Restart}
}

// addLiveTable gives dep Ray's live node table, or says Ray is down, or
// why the table could not be read (D21 refuses all but the first, unless
// the cluster is planned in this run).
func (m *Manager) addLiveTable(ctx context.Context, s Spec, dep *preflight.Deployment) {
	t, err := m.Clusters.Snapshot(ctx, s.cluster(), s.RayAddress)
	switch {
	case err != nil:
		tflog.Debug(ctx, "no live Ray node table for the vLLM plan check", map[string]any{"error": err.Error()})
		dep.RayUnread, _, _ = strings.Cut(err.Error(), "\n")
	case t.GCSUp:
		dep.Table = &t
	default:
		dep.RayDown = true
	}
}

// addCluster gives dep what is known of the cluster vllm serve joins: its
// plan when it is planned in this run, else the GCS address Ray recorded
// on the head, where Ray runs.
func (m *Manager) addCluster(ctx context.Context, s Spec, dep *preflight.Deployment) error {
	site := preflight.ServeSite{Serve: where(s.Runtime), SSHHost: s.Head.Host, RayAddress: s.RayAddress}
	if pc, ok := m.Memo.Cluster(s.RayAddress); ok {
		return m.addPlannedCluster(ctx, s, pc, site, dep)
	}
	if dep.Table == nil {
		return nil
	}
	// A cluster managed elsewhere: the GCS address Ray recorded where
	// vllm serve would run.
	if srv, err := m.server(ctx, s); err == nil {
		if site.Recorded, err = srv.RayCluster(ctx); err == nil {
			site.Live = true
			dep.Site = &site
		}
	}
	return nil
}

// addPlannedCluster: the cluster is planned in this run. Its runtime says
// where Ray runs, and before it runs, its plan says what GPUs it will
// have. Where the model is a local directory or an offline hub snapshot,
// its files are listed on the nodes that will host a vLLM worker.
func (m *Manager) addPlannedCluster(ctx context.Context, s Spec, pc planmemo.Cluster, site preflight.ServeSite, dep *preflight.Deployment) error {
	site.Ray = where(pc.Runtime)
	dep.Site = &site
	dep.ClusterInRun = true
	dep.Nodes, dep.ClusterEnv = withLiveGPUs(pc.Nodes, dep.Table), pc.Env
	if dep.Table == nil {
		dep.Planned = pc.GPUs
	}
	dir, repo := modelSource(s)
	if dir == "" && repo == "" {
		return nil
	}
	_, hosts := preflight.Prepare(*dep)
	var err error
	dep.Listings, err = m.listings(ctx, s, pc, hosts, dir, repo)
	return err
}

// withLiveGPUs gives each planned node the GPUs Ray registered for it,
// where the cluster runs.
func withLiveGPUs(nodes []preflight.ClusterNode, t *ray.Table) []preflight.ClusterNode {
	if t == nil {
		return nodes
	}
	out := slices.Clone(nodes)
	for i, n := range out {
		if live, ok := t.Alive(n.IP); ok {
			out[i].GPUs = live.Resources["GPU"]
		}
	}
	return out
}

// modelSource says where the weights rule finds the model on a node: a
// local directory (an absolute path), or a Hugging Face repository id whose
// snapshot vLLM loads from the hub cache because env sets HF_HUB_OFFLINE
// (the Hub's own truthy values). Anything else is downloaded by each node
// and not checked.
func modelSource(s Spec) (dir, repo string) {
	switch {
	case strings.HasPrefix(s.Model, "/"):
		return s.Model, ""
	case inputs.HFRepository(s.Model) == nil && slices.Contains([]string{"1", "ON", "YES", "TRUE"}, strings.ToUpper(s.Env["HF_HUB_OFFLINE"])):
		return "", s.Model
	}
	return "", ""
}

// listings reads the model's files on every node that will host a vLLM
// worker, in parallel, where Ray (and so vLLM) runs on it.
func (m *Manager) listings(ctx context.Context, s Spec, pc planmemo.Cluster, hosts []preflight.ClusterNode, dir, repo string) (map[string]preflight.Listing, error) {
	hub, revision := hubAndRevision(s)
	out := make([]preflight.Listing, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, n := range hosts {
		wg.Go(func() {
			out[i], errs[i] = m.listing(ctx, s, pc.Endpoints[n.Name], dir, repo, hub, revision)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", n.Name, errs[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	byName := make(map[string]preflight.Listing, len(hosts))
	for i, n := range hosts {
		byName[n.Name] = out[i]
	}
	return byName, nil
}

// listing is the model's files on the node at e: as a spark_model planned
// in this run puts them there, else as the node holds them now.
func (m *Manager) listing(ctx context.Context, s Spec, e transport.Endpoint, dir, repo, hub, revision string) (preflight.Listing, error) {
	if files, ok := m.Memo.Model(e.Host, dir); ok && dir != "" {
		return preflight.Listing{Dir: dir, Files: files}, nil
	}
	argv := s.Runtime.ProbeArgv(transport.Script(nodefacts.ListingScript, dir, repo, hub, revision))
	res, err := m.Pool.Run(ctx, e, transport.Cmd{Step: "list the model's files", Argv: argv})
	if err != nil {
		return preflight.Listing{}, err
	}
	return nodefacts.ParseListing(string(res.Stdout))
}

// hubAndRevision are the Hugging Face cache and the revision vLLM loads:
// HF_HUB_CACHE (or HF_HOME/hub) in env, --revision in extra_args.
func hubAndRevision(s Spec) (hub, revision string) {
	hub = s.Env["HF_HUB_CACHE"]
	if hub == "" && s.Env["HF_HOME"] != "" {
		hub = s.Env["HF_HOME"] + "/hub"
	}
	for i, a := range s.ExtraArgs {
		if v, ok := strings.CutPrefix(a, "--revision="); ok {
			revision = v
		} else if a == "--revision" && i+1 < len(s.ExtraArgs) {
			revision = s.ExtraArgs[i+1]
		}
	}
	return hub, revision
}

// Launched is a server that answered its readiness check.
type Launched struct {
	Identity  string // <pid>:<start time>
	Concluded preflight.Concluded
}

// Launch checks again (values unknown at plan are known now; any server of
// this deployment was stopped first, so the port must be free), starts vllm
// serve, and waits until it answers a completion. On any failure it stops
// what it started and reports the server log's tail: nothing is left
// running.
func (m *Manager) Launch(ctx context.Context, s Spec, sec Secrets, own float64) (Launched, []finding.Finding) {
	concluded, found, left := m.check(ctx, s, own, false)
	if hasError(found) {
		return Launched{}, found
	}
	srv, err := m.server(ctx, s)
	if err != nil {
		return Launched{}, failed(nil, "Cannot reach the head", err)
	}
	argv := vllm.ServeArgv(vllm.ServeOptions{Command: s.VLLMCommand, Model: s.Model, ServedName: s.Served(),
		TP: s.TP, PP: s.PP, Host: s.Host, Port: s.Port, ExtraArgs: s.ExtraArgs})
	// One launch at a time on this head and port, until it answered or was
	// stopped: another apply finds the lock held and is refused.
	dir, unlock, err := srv.LockLaunch(ctx)
	if err != nil {
		return Launched{}, failed(finding.Attr("port"), "Cannot take the vLLM launch lock", err)
	}
	defer unlock()
	if d := stopLeftover(ctx, srv, left); d != nil {
		return Launched{}, d
	}
	id, err := srv.Launch(ctx, dir, launchEnv(s, sec), s.APIKeyFile, raycluster.Holder(), argv)
	if err != nil {
		return Launched{}, failed(nil, "Cannot launch vllm serve", err)
	}
	key, d := apiKey(ctx, srv, s, sec, id)
	if d != nil {
		return Launched{}, d
	}
	tflog.Info(ctx, "vLLM launched, loading the model", map[string]any{"node": srv.Node.Addr(), "process": id, "model": s.Model})
	loading := time.Now()
	if d := awaitReady(ctx, srv, s, key, id); d != nil {
		return Launched{}, d
	}
	if err := srv.Settled(ctx); err != nil {
		found = append(found, finding.Finding{Warning: true, Summary: "Cannot remove the vLLM start marker",
			Detail: fmt.Sprintf("%v\n\nvLLM serves. Should this deployment's state be lost, the next plan would take its server "+
				"for an unfinished launch and replace it.", err)})
	}
	tflog.Info(ctx, "vLLM ready", map[string]any{"node": srv.Node.Addr(), "process": id, "waited_ms": time.Since(loading).Milliseconds()})
	return Launched{Identity: id, Concluded: concluded}, found
}

// hasError reports whether any diagnostic is an error, not a warning.
func hasError(ds []finding.Finding) bool {
	return slices.ContainsFunc(ds, func(d finding.Finding) bool { return !d.Warning })
}

// launchEnv is the environment vllm serve starts with: the deployment's
// env, then the write-only env over it, then what the provider sets
// itself (the Ray address, VLLM_HOST_IP, the API key), which wins.
func launchEnv(s Spec, sec Secrets) map[string]string {
	env := map[string]string{}
	maps.Copy(env, s.Env)
	maps.Copy(env, sec.Env)
	env["RAY_ADDRESS"] = s.RayAddress
	if s.HostIP != "" {
		env["VLLM_HOST_IP"] = s.HostIP
	}
	if sec.APIKey != "" {
		env["VLLM_API_KEY"] = sec.APIKey
	}
	return env
}

// stopLeftover stops the server an unfinished launch left (check read it),
// so the port is free for this one.
func stopLeftover(ctx context.Context, srv vllm.Server, left leftover) []finding.Finding {
	if left.err != nil {
		return failed(nil, "Cannot read the vLLM start marker", left.err)
	}
	if left.identity == "" {
		return nil
	}
	if err := srv.Stop(ctx, left.identity, 10*time.Second); err != nil {
		return failed(nil, "Cannot stop the vllm serve an unfinished launch left", err)
	}
	return nil
}

// apiKey is the key the readiness check presents: the write-only api_key,
// else the one in api_key_file on the head. Should the file not be read,
// the server just launched (process id) is stopped.
func apiKey(ctx context.Context, srv vllm.Server, s Spec, sec Secrets, id string) (string, []finding.Finding) {
	if sec.APIKey != "" || s.APIKeyFile == "" {
		return sec.APIKey, nil
	}
	key, err := srv.ReadKeyFile(ctx, s.APIKeyFile)
	if err != nil {
		_ = srv.Stop(context.WithoutCancel(ctx), id, 10*time.Second)
		return "", failed(finding.Attr("api_key_file"), "Cannot read api_key_file", err)
	}
	return key, nil
}

// awaitReady waits until the server just launched (process id) answers a
// completion, and checks the answer came from it. If not, it stops the
// server and reports the tail of its log.
func awaitReady(ctx context.Context, srv vllm.Server, s Spec, key, id string) []finding.Finding {
	err := srv.Ready(ctx, s.Served(), key, id, nil)
	if err == nil {
		// Ready is what answered on the port; it must be the process this
		// apply started, not another server that held the port meanwhile.
		if run, ferr := srv.Find(ctx); ferr != nil {
			err = fmt.Errorf("cannot tell which process answered on port %d: %w", srv.Port, ferr)
		} else if run.Identity != id {
			err = fmt.Errorf("port %d answered, but from process %s, not the vllm serve this apply started (%s)", srv.Port, run.Identity, id)
		}
	}
	if err == nil {
		return nil
	}
	logPath, logTail := srv.LogTail(context.WithoutCancel(ctx), 40)
	stopErr := srv.Stop(context.WithoutCancel(ctx), id, 10*time.Second)
	detail := fmt.Errorf("vllm serve on %s did not become ready: %w\n\nLast 40 lines of the server log (%s):\n%s",
		srv.Node.Addr(), err, logPath, logTail)
	if stopErr != nil {
		detail = fmt.Errorf("%w\n\nStopping it also failed: %w", detail, stopErr)
	}
	return failed(nil, "vLLM did not become ready", detail)
}

// The states Status reports besides "serving <other model>".
const (
	Serving   = "serving"
	Stopped   = "stopped"
	Unhealthy = "unhealthy"
	// Busy: the process runs but /health gave no answer in time. Not a
	// reason to restart a server under load; the resource warns.
	Busy = "busy"
)

// Status reads what the process identity runs now: Serving when it runs,
// /health answers and it serves s's model; Stopped, Unhealthy, or "serving
// <name>" when another model answers. An error: the head could not be read.
func (m *Manager) Status(ctx context.Context, s Spec, identity string) (string, []finding.Finding) {
	srv, err := m.server(ctx, s)
	if err != nil {
		return "", failed(headHost, "Cannot reach the head", err)
	}
	// One round trip: the process and what listens on its port in one
	// script, /health through the tunnel beside it.
	// A process gone does not wait for /health.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	health := make(chan vllm.Health, 1)
	go func() { health <- srv.Health(hctx) }()
	alive, run, err := srv.AliveAndFind(ctx, identity)
	if err != nil {
		return "", failed(nil, "Cannot read the vLLM process", err)
	}
	if !alive {
		return Stopped, nil
	}
	switch <-health {
	case vllm.HealthBad:
		return Unhealthy, nil
	case vllm.HealthSlow:
		return Busy, nil
	}
	if run != nil && run.Identity == identity {
		if served := vllm.ServedName(run.Options.ServedName, run.Options.Model); served != s.Served() {
			return Serving + " " + served, nil
		}
	}
	return Serving, nil
}

// Find reads the server listening on s's port, for an import.
func (m *Manager) Find(ctx context.Context, s Spec) (*vllm.Running, []finding.Finding) {
	srv, err := m.server(ctx, s)
	if err != nil {
		return nil, failed(headHost, "Cannot reach the head", err)
	}
	run, err := srv.Find(ctx)
	if err != nil {
		return nil, failed(nil, "Cannot import the vLLM deployment", err)
	}
	return run, nil
}

// Stop stops the process identity (and its process group) and removes its
// environment file; an identity that no longer runs is already stopped.
func (m *Manager) Stop(ctx context.Context, s Spec, identity string) []finding.Finding {
	srv, err := m.server(ctx, s)
	if err != nil {
		return failed(headHost, "Cannot reach the head", err)
	}
	if err := srv.Stop(ctx, identity, 10*time.Second); err != nil {
		return failed(nil, "Cannot stop vLLM", err)
	}
	return nil
}
