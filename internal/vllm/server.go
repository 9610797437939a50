package vllm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/lab-infra/terraform-provider-spark/internal/supervise"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Server is one vLLM server on a node, reached through the shared SSH pool.
type Server struct {
	Node transport.Node
	Port int    // 0: it serves no port (a headless rank of internal/mpdeploy)
	Host string // the address it listens on ("" or unspecified: every address)
	// Key names its directory on the node, vllm-<Key>; "": the port. Set
	// where one node runs ranks of several deployments that serve no port
	// there.
	Key string
	// Wrap makes a command run where vLLM runs (the runtime's container);
	// nil runs it on the host. WrapIfRunning does the same for a read that
	// prints its second argument when that container is not running.
	Wrap          func(argv []string, stdin bool) []string
	WrapIfRunning func(argv []string, instead string) []string
	// Restart is the supervise policy: "" or supervise.No starts the
	// server detached (LaunchScript); another puts it under systemd
	// (SuperviseScript), its directory then in the user's state directory,
	// which a reboot keeps (transport.PrivateDir's "home").
	Restart string
	// Watch is the rank set's watch a supervised rank runs beside vLLM
	// (WatchScript's arguments after the pid); nil: none.
	Watch []string
}

// Supervised says the server runs under systemd.
func (s Server) Supervised() bool { return supervise.Supervised(s.Restart) }

// private is the private directory's name as the scripts take it.
func (s Server) private() string {
	if s.Supervised() {
		return "home"
	}
	return ""
}

// Private is the private directory's name as the scripts take it ("" the
// default, "home" for a supervised server), for a caller's own script
// that reads the deployment's directory.
func (s Server) Private() string { return s.private() }

// Unit is the server's systemd unit, in directory dir (Dir's).
func (s Server) Unit(dir string) supervise.Unit {
	return supervise.Unit{Name: supervise.UnitName(s.key()), Description: "vLLM " + s.key() + " (terraform-provider-spark)", Dir: dir, Policy: s.Restart}
}

// key is the suffix of the deployment's directory name.
func (s Server) key() string {
	if s.Key != "" {
		return s.Key
	}
	return strconv.Itoa(s.Port)
}

func (s Server) cmd(step string, argv []string, stdin []byte) transport.Cmd {
	if s.Wrap != nil {
		argv = s.Wrap(argv, stdin != nil)
	}
	return transport.Cmd{Step: step, Argv: argv, Stdin: stdin}
}

// Launch writes the 0600 environment file (VLLM_HOST_IP, VLLM_API_KEY,
// RAY_ADDRESS and the user's env) into the deployment's directory dir (as
// LockLaunch returned it) and starts `vllm serve` detached. It returns the
// process identity ("pid:start").
func (s Server) Launch(ctx context.Context, dir string, env map[string]string, keyFile, holder string, argv []string) (string, error) {
	body, err := transport.EnvFile(env)
	if err != nil {
		return "", err
	}
	if _, err := s.Node.Run(ctx, s.cmd("write vLLM env file", transport.UploadArgv(dir+"/env", 0o600), body)); err != nil {
		return "", err
	}
	var res *transport.Result
	if s.Supervised() {
		u := s.Unit(dir)
		if err := u.Validate(); err != nil {
			return "", err
		}
		res, err = s.Node.Run(ctx, s.cmd("start vllm serve under systemd",
			transport.Script(SuperviseScript, append([]string{dir, keyFile, holder, u.Name, strings.Join(s.Watch, " ")}, argv...)...), []byte(u.Text())))
	} else {
		res, err = s.Node.Run(ctx, s.cmd("launch vllm serve",
			transport.Script(LaunchScript, append([]string{dir, keyFile, holder}, argv...)...), nil))
	}
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(res.Stdout))
	if !strings.Contains(id, ":") {
		return "", fmt.Errorf("launch printed %q, not a process identity", id)
	}
	return id, nil
}

// Unfinished returns the identity of a server whose launch has not
// answered yet (UnfinishedScript) and who launched it; "" when there is
// none. Launching says its launch is still in progress (another apply holds
// the launch lock); otherwise it was left by an apply that was killed.
func (s Server) Unfinished(ctx context.Context) (identity, holder string, launching bool, err error) {
	res, err := s.Node.Run(ctx, s.cmd("read the vLLM start marker", transport.Script(UnfinishedScript, s.key(), s.private()), nil))
	if err != nil {
		return "", "", false, err
	}
	identity, holder, launching = ParseUnfinished(string(res.Stdout))
	return identity, holder, launching, nil
}

// ParseUnfinished reads UnfinishedScript's output.
func ParseUnfinished(out string) (identity, holder string, launching bool) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > 1 {
		holder = lines[1]
	}
	return lines[0], holder, len(lines) > 2 && lines[2] == "launching"
}

// LockLaunch makes or checks the deployment's directory (Dir) and holds
// its launch lock until release is called: one launch at a time per SSH
// user, head and port. The directory is Launch's.
func (s Server) LockLaunch(ctx context.Context) (dir string, release func(), err error) {
	if dir, err = s.Dir(ctx); err != nil {
		return "", nil, err
	}
	h, err := s.Node.Hold(ctx, s.cmd("hold the vLLM launch lock", transport.Script(LaunchLockScript, dir), []byte{}), "locked")
	if err != nil {
		return "", nil, err
	}
	return dir, h.Release, nil
}

// Settled removes the start marker: the launch answered.
func (s Server) Settled(ctx context.Context) error {
	_, err := s.Node.Run(ctx, s.cmd("remove the vLLM start marker", transport.Script(SettledScript, s.key(), s.private()), nil))
	return err
}

// Alive reports whether the process with this identity still runs.
func (s Server) Alive(ctx context.Context, identity string) (bool, error) {
	if identity == "" {
		return false, nil
	}
	argv := transport.Script(StatusScript, identity)
	cmd := s.cmd("check vLLM process", argv, nil)
	if s.WrapIfRunning != nil {
		// The runtime's container not running (the head rebooted): no
		// process of it runs, which is an answer, not an error.
		cmd = transport.Cmd{Step: cmd.Step, Argv: s.WrapIfRunning(argv, "gone")}
	}
	res, err := s.Node.Run(ctx, cmd)
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(res.Stdout)) == "alive", nil
}

// AliveAndFind is Alive and, when the process runs, Find, in one round
// trip (StatusFindScript). run is nil when the process is gone, or when
// nothing (or nothing Find can read) listens on the port.
func (s Server) AliveAndFind(ctx context.Context, identity string) (alive bool, run *Running, err error) {
	if identity == "" {
		return false, nil, nil
	}
	argv := transport.Script(StatusFindScript, identity, strconv.Itoa(s.Port))
	cmd := s.cmd("check vLLM process", argv, nil)
	if s.WrapIfRunning != nil {
		// The runtime's container not running: gone, as in Alive.
		cmd = transport.Cmd{Step: cmd.Step, Argv: s.WrapIfRunning(argv, "gone")}
	}
	res, err := s.Node.Run(ctx, cmd)
	if err != nil {
		return false, nil, err
	}
	state, found, _ := strings.Cut(string(res.Stdout), "@@find\n")
	if strings.TrimSpace(state) != "alive" {
		return false, nil, nil
	}
	if strings.TrimSpace(found) != "" {
		run, _ = ParseFind(found)
	}
	return true, run, nil
}

// Dir makes or checks the deployment's private directory on the node
// (DirScript) and returns its path.
func (s Server) Dir(ctx context.Context) (string, error) {
	res, err := s.Node.Run(ctx, s.cmd("check vLLM directory", transport.Script(DirScript, s.private(), s.key()), nil))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// Stop sends SIGTERM, then SIGKILL after grace, verifies the port closed
// and removes the env file, which holds the API key.
// A supervised server's unit goes first (stopped, disabled, its file
// removed), so systemd does not start it again.
func (s Server) Stop(ctx context.Context, identity string, grace time.Duration) error {
	if s.Supervised() {
		if _, err := s.Node.Run(ctx, s.cmd("remove the vLLM systemd unit", transport.Script(supervise.RemoveScript, supervise.UnitName(s.key())), nil)); err != nil {
			return err
		}
	}
	_, err := s.Node.Run(ctx, s.cmd("stop vLLM", transport.Script(StopScript,
		identity, strconv.Itoa(s.Port), strconv.Itoa(int(grace.Seconds())), "", s.key(), s.private()), nil))
	return err
}

// Rewrite writes the server's unit again in dir (as UnitStatus returned
// it) and enables it, restarting nothing (supervise.RewriteScript): the
// repair of a unit changed or disabled by hand while its process runs.
// It returns the identity of the process the unit runs.
func (s Server) Rewrite(ctx context.Context, dir string) (string, error) {
	u := s.Unit(dir)
	if err := u.Validate(); err != nil {
		return "", err
	}
	res, err := s.Node.Run(ctx, s.cmd("write the vLLM systemd unit again", transport.Script(supervise.RewriteScript, u.Name), []byte(u.Text())))
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(res.Stdout))
	if !strings.Contains(id, ":") {
		return "", fmt.Errorf("rewriting %s printed %q, not a process identity", u.Name, id)
	}
	return id, nil
}

// UnitStatus reads what systemd knows of the server's unit, and the
// directory the unit runs in (UnitStatusScript).
func (s Server) UnitStatus(ctx context.Context) (st supervise.Status, dir string, err error) {
	res, err := s.Node.Run(ctx, s.cmd("read the vLLM systemd unit", transport.Script(UnitStatusScript, supervise.UnitName(s.key()), s.private(), s.key()), nil))
	if err != nil {
		return supervise.Status{}, "", err
	}
	out := string(res.Stdout)
	if d, rest, ok := strings.Cut(out, "\n"); ok && strings.HasPrefix(d, "Dir=") {
		dir, out = strings.TrimPrefix(d, "Dir="), rest
	}
	return supervise.ParseStatus(out), dir, nil
}

// LogTail returns the path and the last n lines of the server log.
func (s Server) LogTail(ctx context.Context, n int) (string, string) {
	dir, err := s.Dir(ctx)
	if err != nil {
		return "(unknown)", "(log unavailable: " + err.Error() + ")"
	}
	res, err := s.Node.Run(ctx, s.cmd("read vLLM log", transport.Script(LogTailScript, dir, strconv.Itoa(n)), nil))
	if err != nil || res == nil {
		return dir + "/server.log", "(log unavailable)"
	}
	return dir + "/server.log", string(res.Stdout)
}

// Running describes the server found listening on the port.
type Running struct {
	Identity   string
	HostIP     string // VLLM_HOST_IP in its environment
	RayAddress string
	// ExecutorFlag is VLLM_USE_RAY_V2_EXECUTOR_BACKEND in its environment
	// ("" unset): which Ray executor it runs depends on it.
	ExecutorFlag string
	Options      ServeOptions
}

// Find reads the server listening on the port: identity, environment and
// command line.
func (s Server) Find(ctx context.Context) (*Running, error) {
	res, err := s.Node.Run(ctx, s.cmd("find vLLM on port "+strconv.Itoa(s.Port), transport.Script(FindScript, strconv.Itoa(s.Port)), nil))
	if err != nil {
		return nil, err
	}
	return ParseFind(string(res.Stdout))
}

// ParseFind reads FindScript's output.
func ParseFind(out string) (*Running, error) {
	head, cmdline, ok := strings.Cut(out, "@@cmdline\n")
	if !ok {
		return nil, fmt.Errorf("unexpected output while looking for vLLM: %q", out)
	}
	lines := strings.Split(strings.TrimSpace(head), "\n")
	r := &Running{Identity: strings.TrimSpace(lines[0])}
	for _, l := range lines[1:] {
		if v, ok := strings.CutPrefix(l, "VLLM_HOST_IP="); ok {
			r.HostIP = v
		}
		if v, ok := strings.CutPrefix(l, "RAY_ADDRESS="); ok {
			r.RayAddress = v
		}
		if v, ok := strings.CutPrefix(l, "VLLM_USE_RAY_V2_EXECUTOR_BACKEND="); ok {
			r.ExecutorFlag = v
		}
	}
	o, err := ParseServeArgv(cmdline)
	if err != nil {
		return nil, err
	}
	r.Options = o
	return r, nil
}

// dialAddr is where the node itself reaches the server: its loopback when
// it listens on every address (or on "localhost"), else the one address it
// was told to listen on.
func (s Server) dialAddr() string {
	host := "127.0.0.1"
	if a, err := netip.ParseAddr(s.Host); err == nil && !a.IsUnspecified() {
		host = a.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(s.Port))
}

// Transport reaches the server's port from the node itself, through the
// SSH connection: the port may be reachable only from the node.
func (s Server) Transport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return s.Node.DialContext(ctx, "tcp", s.dialAddr())
		},
		MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second,
	}
}

// Ready waits until the server is ready (see WaitReady).
func (s Server) Ready(ctx context.Context, servedName, apiKey, identity string, logger retryablehttp.LeveledLogger) error {
	tr := s.Transport()
	defer tr.CloseIdleConnections()
	return WaitReady(ctx, Readiness{
		BaseURL: "http://127.0.0.1:" + strconv.Itoa(s.Port), ServedName: servedName, APIKey: apiKey,
		Transport: tr, Logger: logger,
		Alive: func(ctx context.Context) (bool, error) { return s.Alive(ctx, identity) },
	})
}

// RayCluster reads the GCS address Ray recorded where vLLM will run
// (<temp>/ray/ray_current_cluster): "" when there is none, i.e. vllm serve
// would run outside the namespace or container Ray runs in.
func (s Server) RayCluster(ctx context.Context) (string, error) {
	res, err := s.Node.Run(ctx, s.cmd("find Ray where vLLM runs",
		[]string{"sh", "-c", `cat "${TMPDIR:-/tmp}/ray/ray_current_cluster" 2>/dev/null || true`}, nil))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// ReadKeyFile reads an API key file where vLLM runs (for the readiness
// probe; the key goes no further than this process's memory).
func (s Server) ReadKeyFile(ctx context.Context, path string) (string, error) {
	res, err := s.Node.Run(ctx, s.cmd("read api_key_file", []string{"cat", path}, nil))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// Health is what /health said.
type Health int

const (
	HealthOK   Health = iota // 200
	HealthBad                // another status, or the port refused
	HealthSlow               // no answer in time: a busy server answers late
)

// healthTimeout bounds one /health request. vLLM answers it from its API
// process, which a busy engine can hold up for seconds.
const healthTimeout = 10 * time.Second

// Health asks /health once.
func (s Server) Health(ctx context.Context) Health {
	tr := s.Transport()
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: healthTimeout}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(s.Port)+"/health", nil)
	if err != nil {
		return HealthBad
	}
	return healthOf(c.Do(req))
}

// healthOf reads one /health answer: a request that timed out is a slow
// server, not a broken one.
func healthOf(resp *http.Response, err error) Health {
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return HealthSlow
		}
		return HealthBad
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return HealthOK
	}
	return HealthBad
}
