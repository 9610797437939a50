// Starting Ray on a node (its runtime's container first, when it has one)
// and stopping it, and waiting until the nodes registered under the
// addresses the plan predicted: the apply's side of a cluster.

package raycluster

import (
	"context"
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
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// EnsureRuntime starts the node's container when the runtime has one.
func (m *Manager) EnsureRuntime(ctx context.Context, s Spec, n NodeSpec) error {
	if argv := s.Runtime.EnsureArgv(); argv != nil {
		_, err := m.run(ctx, n.Endpoint, "start runtime container", argv)
		return err
	}
	return nil
}

// Start runs `ray start` for one node. Processes are started in their own
// session with no terminal, so they outlive the SSH session. registeredIP
// is the address Ray registers for the node (planned): it becomes the
// node's VLLM_HOST_IP, which vLLM's worker actors read from the raylet's
// environment.
//
// With token authentication the head keeps the token it already has at
// Ray's default path (or gets a new random one) and a worker gets token,
// read from the head: on stdin, never in argv, never in state.
func (m *Manager) Start(ctx context.Context, s Spec, n NodeSpec, headIP, registeredIP, token string) error {
	if err := m.prepare(ctx, s, n, token); err != nil {
		return err
	}
	return m.startRay(ctx, s, n, headIP, registeredIP)
}

// prepare is what a node needs before its ray start: its runtime's
// container and the cluster's auth token.
func (m *Manager) prepare(ctx context.Context, s Spec, n NodeSpec, token string) error {
	m.forget()
	if err := m.EnsureRuntime(ctx, s, n); err != nil {
		return err
	}
	return m.placeToken(ctx, s, n, token)
}

// startRay runs the node's ray start, prepared.
func (m *Manager) startRay(ctx context.Context, s Spec, n NodeSpec, headIP, registeredIP string) error {
	m.forget()
	o, step := startOptions(s, n, headIP, startEnv(s, n, registeredIP))
	argv, envFile, err := ray.StartCommand(o)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err = m.Pool.Run(ctx, n.Endpoint, transport.Cmd{Step: step, Argv: s.Runtime.Wrap(append([]string{"setsid", "-w"}, argv...), true), Stdin: envFile}); err != nil {
		return err
	}
	tflog.Info(ctx, "Ray started", map[string]any{"node": n.Name, "host": n.Endpoint.Host, "duration_ms": time.Since(start).Milliseconds()})
	return nil
}

// placeToken gives the node the cluster's auth token before its Ray starts,
// when the cluster uses token authentication: the head keeps or gets one,
// a worker gets the head's.
func (m *Manager) placeToken(ctx context.Context, s Spec, n NodeSpec, token string) error {
	switch {
	case !s.AuthToken:
		return nil
	case n.Name == HeadName:
		return m.ensureToken(ctx, s, n)
	default:
		return m.putToken(ctx, s, n, token)
	}
}

// startEnv is the environment a node's Ray starts with: the cluster's env,
// its write-only secret env over it, the auth mode auth_mode says,
// VLLM_HOST_IP set to the address Ray registers unless env gives one, and
// the node's own interface as NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME.
//
// The interface goes into the raylet's environment, which every Ray worker
// process on the node inherits: vLLM's RayExecutorV2 only fills in the
// driver's variables a worker lacks (os.environ.setdefault,
// vllm/v1/executor/ray_executor_v2.py, 0.32.0), so each node keeps its own
// port name. The plan refuses the same variables in env beside it (D9).
//
// The auth mode is set either way. Ray 2.60's `ray start --head` with
// RAY_AUTH_MODE unset turns token authentication on when
// ~/.ray/auth_token exists, and a worker's does not (ray/scripts/scripts.py
// L1069, only in `start --head`; maybe_enable_token_auth_if_token_available
// in ray/_private/authentication/authentication_token_setup.py, which
// respects RAY_AUTH_MODE when it is set; 2.60.0's wheel): a head with a token file left
// from another cluster would lock its workers out of a cluster declared
// without authentication. "disabled" is the default of every release
// that reads the variable (AUTH_MODE in src/ray/common/ray_config_def.h,
// 2.52.1), so saying it changes nothing there.
func startEnv(s Spec, n NodeSpec, registeredIP string) map[string]string {
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = v
	}
	for k, v := range s.SecretEnv {
		env[k] = v
	}
	env["RAY_AUTH_MODE"] = "disabled"
	if s.AuthToken {
		env["RAY_AUTH_MODE"] = "token"
	}
	if _, given := env["VLLM_HOST_IP"]; !given && registeredIP != "" {
		env["VLLM_HOST_IP"] = registeredIP
	}
	if n.Interface != "" {
		for _, v := range preflight.NodeInterfaceVars {
			env[v] = n.Interface
		}
	}
	return env
}

// startOptions is the node's ray start, and the step name its logs and
// errors carry: the head listens on the GCS port, a worker joins the head
// at headIP.
func startOptions(s Spec, n NodeSpec, headIP string, env map[string]string) (ray.StartOptions, string) {
	o := ray.StartOptions{RayCommand: s.Runtime.Ray(), NodeIP: n.NodeIP, NumGPUs: n.NumGPUs, Resources: n.Resources,
		Labels: n.Labels, Env: env, ExtraArgs: s.StartArgs}
	step := "start Ray worker " + n.Name
	if n.Name == HeadName {
		o.Head, o.GCSPort, o.DashboardHost = true, s.GCSPort, s.DashboardHost
		step = "start Ray head"
	} else {
		o.HeadAddress = net.JoinHostPort(headIP, strconv.Itoa(s.GCSPort))
	}
	return o, step
}

// Stop stops this cluster's Ray on one node (gcsAddr: the head's registered
// IP and GCS port), and only it: another cluster's Ray on the node, or
// another user's, keeps running (ray.StopArgv). In a container this
// provider created, the container goes with it.
func (m *Manager) Stop(ctx context.Context, s Spec, n NodeSpec, gcsAddr string) error {
	m.forget()
	stop := ray.StopArgv(gcsAddr, s.GCSPort, n.Name == HeadName)
	if _, err := m.run(ctx, n.Endpoint, "stop Ray on "+n.Name, s.Runtime.StopArgv(stop)); err != nil {
		return err
	}
	tflog.Info(ctx, "Ray stopped", map[string]any{"node": n.Name, "host": n.Endpoint.Host})
	return nil
}

// RegistrationError says Ray registered a node under another address than
// the plan predicted, or not at all.
type RegistrationError struct {
	Node, Want string
	Got        []string
	Waited     time.Duration
}

func (e *RegistrationError) Error() string {
	if len(e.Got) == 0 {
		return fmt.Sprintf("Ray did not register %s as %s within %s", e.Node, e.Want, e.Waited.Round(time.Second))
	}
	return fmt.Sprintf("Ray registered %s as %s, not %s as planned: the node's address detection disagreed with the "+
		"prediction. Set node_ip on %s to the address you want Ray to use", e.Node, strings.Join(e.Got, ", "), e.Want, e.Node)
}

// WaitRegistered polls the node table until every wanted node (name -> IP)
// is alive under its IP, not counting the stale node IDs (the
// incarnations an update stopped: killed without a word, the GCS lists
// them alive until its health checks fail). A node whose hostname shows up
// alive under another IP fails at once.
func (m *Manager) WaitRegistered(ctx context.Context, s Spec, gcsAddr string, want, hostnames map[string]string, stale map[string]bool) (ray.Table, error) {
	start := time.Now()
	var last ray.Table
	var lastErr error
	for {
		t, err := m.Table(ctx, s, gcsAddr)
		if err == nil && t.GCSUp {
			last = t
			missing, wrong := checkRegistered(t, want, hostnames, stale)
			if wrong != nil {
				return t, wrong
			}
			if missing == "" {
				logRegistered(ctx, want, start)
				return t, nil
			}
			lastErr = &RegistrationError{Node: missing, Want: want[missing], Waited: time.Since(start)}
		} else {
			lastErr = unreadTable(err, t, gcsAddr)
		}
		select {
		case <-ctx.Done():
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return last, fmt.Errorf("%w (gave up: %w)", lastErr, ctx.Err())
		case <-time.After(pollAfter(time.Since(start))):
		}
	}
}

// pollAfter is how long WaitRegistered waits between reads: a tenth of a
// second while a node usually registers (a read is one light round trip
// to the GCS, the token read once), then a second.
func pollAfter(waited time.Duration) time.Duration {
	if waited < 10*time.Second {
		return 100 * time.Millisecond
	}
	return time.Second
}

// waitGCSListening waits until something accepts TCP connections at the
// head's GCS address, dialled from the head through the SSH connection: a
// tunnel that opens costs the head no process, so it is tried every 50 ms.
// The create's plan found the port free and its start marker claims it, so
// what listens there is the GCS this create's ray start started. Any answer
// but "connection refused" ends the wait with that error.
func (m *Manager) waitGCSListening(ctx context.Context, s Spec, gcsAddr string) error {
	conn, err := m.Pool.Get(ctx, s.Head.Endpoint)
	if err != nil {
		return err
	}
	start := time.Now()
	for {
		c, err := conn.DialContext(ctx, "tcp", gcsAddr)
		switch {
		case err == nil:
			_ = c.Close()
			tflog.Debug(ctx, "Ray head's GCS accepts connections", map[string]any{"gcs": gcsAddr, "waited_ms": time.Since(start).Milliseconds()})
			return nil
		case !refused(err):
			return fmt.Errorf("the head's GCS at %s: %w", gcsAddr, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the head's GCS at %s did not accept connections (gave up: %w)", gcsAddr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// unreadTable is why a node-table read told nothing: its error, else the
// GCS that did not answer.
func unreadTable(err error, t ray.Table, gcsAddr string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("the head's GCS at %s does not answer: %s", gcsAddr, t.GCSError)
}

// logRegistered logs every wanted node, in name order, once all registered.
func logRegistered(ctx context.Context, want map[string]string, start time.Time) {
	for _, name := range slices.Sorted(maps.Keys(want)) {
		tflog.Info(ctx, "Ray node registered", map[string]any{"node": name, "ip": want[name], "waited_ms": time.Since(start).Milliseconds()})
	}
}

// startWorkers starts Ray on the named workers in parallel, each joining
// the head at headIP under the IP registered names for it. With clean, any
// Ray already on a worker is stopped first: the node is about to join a new
// cluster, and a raylet left from a cluster that is gone would hold its
// ports. gate, when not nil, is waited for before each worker's ray start
// (its stop, container and token done): a create's workers join once the
// head's GCS lists the head, while the head's own start goes on. The
// errors are by worker name; none when every worker started.
func (m *Manager) startWorkers(ctx context.Context, s Spec, names []string, headIP string, registered map[string]string, token string, clean bool, gate func() error) map[string]error {
	var mu sync.Mutex
	errs := map[string]error{}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			w := s.Workers[name]
			var err error
			if clean {
				err = m.Stop(ctx, s, w, s.GCSAddr(headIP))
			}
			if err == nil {
				err = m.prepare(ctx, s, w, token)
			}
			if err == nil && gate != nil {
				err = gate()
			}
			if err == nil {
				err = m.startRay(ctx, s, w, headIP, registered[name])
			}
			if err != nil {
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// workerFailures are the errors of startWorkers, one per worker, in name
// order, each on its worker's attribute.
func workerFailures(s Spec, summary string, errs map[string]error) []finding.Finding {
	var out []finding.Finding
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		out = append(out, failed(s.Workers[name].Path, summary, errs[name]))
	}
	return out
}

// checkRegistered compares Ray's node table with the nodes wanted (name ->
// IP): wrong when a node's hostname is alive under another IP (Ray will
// not move it, so waiting is pointless), else missing names one node not
// alive under its IP yet ("" when every node is).
func checkRegistered(t ray.Table, want, hostnames map[string]string, stale map[string]bool) (missing string, wrong *RegistrationError) {
	for name, ip := range want {
		if _, ok := t.AliveExcept(ip, stale); ok {
			continue
		}
		missing = name
		for _, n := range t.Nodes {
			if n.Alive && hostnames[name] != "" && n.Hostname == hostnames[name] && n.IP != ip {
				return missing, &RegistrationError{Node: name, Want: ip, Got: []string{n.IP}}
			}
		}
	}
	return missing, nil
}
