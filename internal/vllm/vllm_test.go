package vllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflogtest"

	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

func TestServeArgvRoundTrip(t *testing.T) {
	o := ServeOptions{Command: "/usr/local/bin/vllm", Model: "Qwen/Qwen3.5-122B-A10B-FP8", ServedName: "qwen3.5", TP: 2, PP: 1,
		Port: 8000, ExtraArgs: []string{"--max-model-len", "32768"}}
	argv := ServeArgv(o)
	if strings.Contains(strings.Join(argv, " "), "api-key") {
		t.Fatal("the API key must never be an argument")
	}
	// As /proc/<pid>/cmdline shows a script run through its #! line.
	cmdline := "/opt/ray/bin/python\x00" + strings.Join(argv, "\x00") + "\x00"
	got, err := ParseServeArgv(cmdline)
	if err != nil {
		t.Fatal(err)
	}
	if got.Command != o.Command || got.Model != o.Model || got.ServedName != o.ServedName || got.TP != 2 || got.PP != 1 ||
		got.Port != 8000 || strings.Join(got.ExtraArgs, " ") != "--max-model-len 32768" {
		t.Fatalf("round trip: %+v", got)
	}
	if _, err := ParseServeArgv("python\x00-m\x00http.server\x00"); err == nil {
		t.Fatal("a non-vllm command line parsed")
	}
	if o, err := ParseServeArgv("vllm\x00serve\x00m\x00--tensor-parallel-size=4\x00"); err != nil || o.TP != 4 {
		t.Fatalf("--flag=value: %+v %v", o, err)
	}
}

// The env file must survive sh's `set -a; .` with any value, and reject
// keys that are not variable names.
func TestEnvFileSourcesExactly(t *testing.T) {
	env := map[string]string{"VLLM_API_KEY": "k'$(id)`x`\"; rm -rf /", "VLLM_HOST_IP": "10.1.230.180", "EMPTY": ""}
	b, err := transport.EnvFile(env)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", "-c", `set -a; eval "$1"; printf '%s\n%s\n%s' "$VLLM_API_KEY" "$VLLM_HOST_IP" "$EMPTY"`, "sh", string(b)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != env["VLLM_API_KEY"]+"\n10.1.230.180\n" {
		t.Fatalf("sourced %q", out)
	}
	if _, err := transport.EnvFile(map[string]string{"BAD KEY": "x"}); err == nil {
		t.Fatal("bad key accepted")
	}
}

func TestParseFind(t *testing.T) {
	r, err := ParseFind("4242:98765\nVLLM_HOST_IP=10.1.230.180\nRAY_ADDRESS=10.1.230.180:6379\nVLLM_USE_RAY_V2_EXECUTOR_BACKEND=0\n@@cmdline\n/opt/ray/bin/python\x00/usr/local/bin/vllm\x00serve\x00m\x00--served-model-name\x00q\x00")
	if err != nil {
		t.Fatal(err)
	}
	if r.Identity != "4242:98765" || r.HostIP != "10.1.230.180" || r.RayAddress != "10.1.230.180:6379" || r.Options.ServedName != "q" ||
		r.ExecutorFlag != "0" {
		t.Fatalf("%+v", r)
	}
}

// Launch, status and stop scripts, run for real with the local shell
// against a stand-in process.
// running lists the pids of processes whose command line matches pattern,
// leaving out zombies: a killed child is a zombie until its new parent reaps
// it, and whether that takes a millisecond or a second depends on what PID 1
// of the machine running the tests does (this was the test's flakiness).
func running(pattern string) string {
	out, _ := exec.Command("pgrep", "-f", pattern).Output()
	var live []string
	for _, pid := range strings.Fields(string(out)) {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:])); len(f) > 0 && f[0] != "Z" {
			live = append(live, pid)
		}
	}
	return strings.Join(live, " ")
}

func TestLaunchStatusStopScripts(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("/bin/sh", "-c", `umask 077; printf 'GREETING=hi\n' > "$1/env"`, "sh", dir).CombinedOutput(); err != nil {
		t.Fatal(string(out))
	}
	// The server has a child of its own, as vllm serve has its EngineCore:
	// stop must take the whole process group, under dash's kill too.
	child := fmt.Sprintf("sleep 31.%d", os.Getpid())
	out, err := exec.Command("/bin/sh", "-c", LaunchScript, "sh", dir, "", "test holder", "sh", "-c", child+` & echo "$GREETING"; exec sleep 30`).Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(out))
	status := func() string {
		o, _ := exec.Command("/bin/sh", "-c", StatusScript, "sh", id).Output()
		return strings.TrimSpace(string(o))
	}
	if status() != "alive" {
		t.Fatalf("launched process %s not alive", id)
	}
	// The server sourced the env file: its greeting reaches the log, and
	// its child runs (both on the server's own time: waited for, bounded).
	logged := func() string {
		o, _ := exec.Command("/bin/sh", "-c", LogTailScript, "sh", dir, "5").Output()
		return strings.TrimSpace(string(o))
	}
	for i := 0; i < 100 && (logged() != "hi" || running(child) == ""); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if logged() != "hi" {
		t.Fatalf("log = %q: env file not sourced", logged())
	}
	// Launching again while it runs is refused.
	if err := exec.Command("/bin/sh", "-c", LaunchScript, "sh", dir, "", "test holder", "sleep", "1").Run(); err == nil {
		t.Fatal("a second launch was accepted")
	}
	if o, err := exec.Command("/bin/sh", "-c", StopScript, "sh", id, "1", "2").CombinedOutput(); err != nil {
		t.Fatalf("stop: %v %s", err, o)
	}
	if status() != "gone" {
		t.Fatal("process survived stop")
	}
	if o := running(child); o != "" {
		t.Fatalf("the server's child (%s) survived stop: pid %s", child, o)
	}
	if _, err := os.Stat(filepath.Join(dir, "env")); err != nil {
		t.Fatalf("stop without a directory must leave the env file: %v", err)
	}
	// A server that died alone leaves its child in its process group (as
	// vLLM's EngineCore outlives a killed API server): stop takes it.
	out, err = exec.Command("/bin/sh", "-c", LaunchScript, "sh", dir, "", "test holder", "sh", "-c", child+` & exec sleep 30`).Output()
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSpace(string(out))
	leader := strings.SplitN(id, ":", 2)[0]
	// The leader forks its child on its own time: wait (bounded) for it,
	// or the kill below can come first and leave no child to outlive it.
	// (20 s: on a machine whose two cores build the lab meanwhile, 5 s
	// were seen to pass before the fork.)
	for i := 0; i < 400 && running(child) == ""; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if running(child) == "" {
		t.Fatal("test setup: the server's child never started")
	}
	if err := exec.Command("kill", "-9", leader).Run(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if running(child) == "" {
		t.Fatal("test setup: the child should outlive its leader")
	}
	if o, err := exec.Command("/bin/sh", "-c", StopScript, "sh", id, "1", "2", dir).CombinedOutput(); err != nil {
		t.Fatalf("stop: %v %s", err, o)
	}
	if o := running(child); o != "" {
		t.Fatalf("the dead server's child (%s) survived stop: pid %s", child, o)
	}
	if _, err := os.Stat(filepath.Join(dir, "env")); !os.IsNotExist(err) {
		t.Fatalf("stop left the env file, which holds the API key: %v", err)
	}
	// A reused PID with another start time is not "our" process.
	pid := strings.SplitN(id, ":", 2)[0]
	o, _ := exec.Command("/bin/sh", "-c", StatusScript, "sh", pid+":1").Output()
	if strings.TrimSpace(string(o)) != "gone" {
		t.Fatal("identity ignores the start time")
	}
	// The stop removed the pid file of the server it stopped.
	if _, err := os.Stat(filepath.Join(dir, "pid")); !os.IsNotExist(err) {
		t.Fatalf("stop left the pid file: %v", err)
	}
	// A pid file naming a live process by PID but another start time (the
	// PID reused since) does not block a launch; it used to, forever.
	reused := fmt.Sprintf("%d:1", os.Getpid())
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(reused+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("/bin/sh", "-c", LaunchScript, "sh", dir, "", "test holder", "sleep", "30").Output()
	if err != nil {
		t.Fatalf("a launch was refused over a reused PID: %v", err)
	}
	_ = exec.Command("/bin/sh", "-c", StopScript, "sh", strings.TrimSpace(string(out)), "1", "2", dir).Run()
}

// An empty (or blank) api_key_file is refused before anything starts:
// vLLM would serve without authentication.
func TestLaunchRefusesAnEmptyKeyFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "env"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", LaunchScript, "sh", dir, key, "test holder", "sleep", "30")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil || !strings.Contains(stderr.String(), "serve without authentication") {
		t.Fatalf("an empty key file: err %v, stderr %q", err, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "pid")); !os.IsNotExist(err) {
		t.Fatal("something was started")
	}
}

// A launch leaves its start marker until it answered or was stopped: found
// while the server runs, the server is an unfinished launch; settled, or
// stopped, it is not; a marker whose server is gone names nothing.
func TestStartMarkerScripts(t *testing.T) {
	private := filepath.Join(t.TempDir(), "tps")
	dir := filepath.Join(private, "vllm-8000")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	unfinished := func() string {
		out, err := exec.Command("/bin/sh", "-c", UnfinishedScript, "sh", "8000", private).CombinedOutput()
		if err != nil {
			t.Fatalf("unfinished: %v %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	launch := func() string {
		// What Server.Launch does first: the env file (a stop removes it).
		if err := os.WriteFile(filepath.Join(dir, "env"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("/bin/sh", "-c", LaunchScript, "sh", dir, "", "pid 42 on laptop", "sleep", "30").CombinedOutput()
		if err != nil {
			t.Fatalf("launch: %v %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	id := launch()
	t.Cleanup(func() { _ = exec.Command("/bin/sh", "-c", StopScript, "sh", id, "1", "1", dir).Run() })
	if got := unfinished(); got != id+"\npid 42 on laptop" {
		t.Fatalf("a launch that has not answered: unfinished = %q, want its identity and holder", got)
	}
	if out, err := exec.Command("/bin/sh", "-c", SettledScript, "sh", "8000", private).CombinedOutput(); err != nil {
		t.Fatalf("settled: %v %s", err, out)
	}
	if got := unfinished(); got != "" {
		t.Fatalf("a settled launch is unfinished: %q", got)
	}
	// Stopped while unfinished: the marker goes with it.
	if out, err := exec.Command("/bin/sh", "-c", StopScript, "sh", id, "1", "1", dir).CombinedOutput(); err != nil {
		t.Fatalf("stop: %v %s", err, out)
	}
	id = launch()
	if out, err := exec.Command("/bin/sh", "-c", StopScript, "sh", id, "1", "1", dir).CombinedOutput(); err != nil {
		t.Fatalf("stop: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "starting")); !os.IsNotExist(err) {
		t.Fatalf("stop left the start marker: %v", err)
	}
	// A marker whose server died: nothing to replace.
	id = launch()
	if err := exec.Command("kill", "-9", strings.SplitN(id, ":", 2)[0]).Run(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if got := unfinished(); got != "" {
		t.Fatalf("a dead server is unfinished: %q", got)
	}
	// A live unfinished launch, seen through a directory that is not the
	// user's own (a link another local user could have planted to point
	// anywhere): it proves nothing, and nothing is reported; seen through
	// the real directory, the same launch is.
	id = launch()
	link := private + "-link"
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	if got := unfinished(); got != id+"\npid 42 on laptop" {
		t.Fatalf("test setup: the live launch is not unfinished: %q", got)
	}
	if out, err := exec.Command("/bin/sh", "-c", UnfinishedScript, "sh", "8000", link).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("a marker in a directory that is not the user's own was believed: %q %v", out, err)
	}
}

// The private directory is made 0700 for this user, and refused when
// someone else could have made or redirected it.
func TestDirScript(t *testing.T) {
	run := func(base string) (string, error) {
		out, err := exec.Command("/bin/sh", "-c", DirScript, "sh", base, "8000").CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	base := filepath.Join(t.TempDir(), "tps")
	dir, err := run(base)
	if err != nil || dir != base+"/vllm-8000" {
		t.Fatalf("fresh base: %q %v", dir, err)
	}
	for _, p := range []string{base, dir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: mode %v %v, want 0700", p, fi.Mode(), err)
		}
	}
	// Made loose by someone: tightened again.
	if err := os.Chmod(base, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := run(base); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(base); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v after a second run, want 0700", fi.Mode())
	}
	// A symlink (to a directory someone else controls) is refused.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if out, err := run(link); err == nil || !strings.Contains(out, "is not a directory owned by") {
		t.Fatalf("symlinked base accepted: %q %v", out, err)
	}
	// A directory another user owns is refused (root can make one here).
	if os.Geteuid() == 0 {
		other := filepath.Join(t.TempDir(), "other")
		if err := os.Mkdir(other, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if out, err := run(other); err == nil || !strings.Contains(out, "another local user") {
			t.Fatalf("another user's base accepted: %q %v", out, err)
		}
	}
}

// readyServer answers like vLLM: /health first, the model once loaded,
// completions only with the key.
func readyServer(t *testing.T, loadAfter int32) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if strings.HasPrefix(r.URL.Path, "/v1") && r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(401)
			return
		}
		switch r.URL.Path {
		case "/health":
			w.WriteHeader(200)
		case "/v1/models":
			id := "loading"
			if n > loadAfter {
				id = "qwen3.5"
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"data": []map[string]string{{"id": id}}})
		case "/v1/completions":
			_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]string{"text": "x"}}})
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestWaitReadyGatesOnModelAndCompletion(t *testing.T) {
	srv, calls := readyServer(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := WaitReady(ctx, Readiness{BaseURL: srv.URL, ServedName: "qwen3.5", APIKey: "k", Transport: http.DefaultTransport}); err != nil {
		t.Fatal(err)
	}
	if calls.Load() < 5 {
		t.Fatalf("ready after %d calls: the model was not loaded yet", calls.Load())
	}
}

func TestWaitReadyStopsWhenProcessDies(t *testing.T) {
	srv, _ := readyServer(t, 1<<30)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := WaitReady(ctx, Readiness{BaseURL: srv.URL, ServedName: "qwen3.5", APIKey: "k", Transport: http.DefaultTransport,
		Alive: func(context.Context) (bool, error) { return false, nil }})
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("want an early 'exited' error, got %v", err)
	}
}

func TestWaitReadyTimesOutWithLastReason(t *testing.T) {
	srv, _ := readyServer(t, 1<<30)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := WaitReady(ctx, Readiness{BaseURL: srv.URL, ServedName: "qwen3.5", APIKey: "wrong", Transport: http.DefaultTransport})
	if err == nil || !strings.Contains(err.Error(), "/v1/models") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("want the last reason (401 on /v1/models), got %v", err)
	}
}

func FuzzParseServeArgv(f *testing.F) {
	f.Add("vllm\x00serve\x00m\x00--port\x008001\x00")
	f.Add("serve\x00")
	f.Add("x\x00serve\x00m\x00--tensor-parallel-size\x00")
	f.Fuzz(func(t *testing.T, cmdline string) {
		o, err := ParseServeArgv(cmdline)
		if err == nil && o.Model == "" && !strings.Contains(cmdline, "serve\x00\x00") {
			t.Fatalf("parsed without a model: %q", cmdline)
		}
	})
}

// With TF_LOG=debug the readiness polling shows each request and why the
// server is not ready yet, and never the API key.
func TestWaitReadyLogsEachRequestAndNotTheKey(t *testing.T) {
	const key = "CANARY-api-key-77d1"
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 3 || r.Header.Get("Authorization") != "Bearer "+key { // 3: one probe, retries included
			w.WriteHeader(503)
			return
		}
		switch r.URL.Path {
		case "/v1/models":
			_ = json.NewEncoder(w).Encode(map[string]any{"data": []map[string]string{{"id": "m"}}})
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{})
		}
	}))
	t.Cleanup(srv.Close)
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(tflogtest.RootLogger(context.Background(), &buf), 30*time.Second)
	defer cancel()
	if err := WaitReady(ctx, Readiness{BaseURL: srv.URL, ServedName: "m", APIKey: key, Transport: http.DefaultTransport}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), key) {
		t.Fatalf("the log holds the API key:\n%s", buf.String())
	}
	for _, want := range []string{`"@message":"performing request"`, `"subsystem":"retryablehttp"`, `"@message":"vLLM not ready yet"`, `"stage":"/health"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the log has no %s:\n%s", want, buf.String())
		}
	}
}

func TestParseParallel(t *testing.T) {
	for _, c := range []struct {
		args []string
		want Parallel
	}{
		{nil, Parallel{DP: 1, PCP: 1, DPBackend: "mp"}},
		{[]string{"--data-parallel-size", "2", "--data-parallel-backend", "ray"}, Parallel{DP: 2, PCP: 1, DPBackend: "ray"}},
		{[]string{"-dp=4", "-dpb=ray", "-dpa", "192.168.229.11", "-pcp", "2"}, Parallel{DP: 4, PCP: 2, DPBackend: "ray", DPAddress: "192.168.229.11"}},
		{[]string{"--dtype", "float32", "--fail-on-environ-validation"}, Parallel{DP: 1, PCP: 1, DPBackend: "mp", FailOnEnviron: true}},
	} {
		got, err := ParseParallel(c.args)
		if err != nil || got != c.want {
			t.Errorf("ParseParallel(%q) = %+v, %v; want %+v", c.args, got, err, c.want)
		}
	}
	for _, bad := range [][]string{{"-dp", "0"}, {"--data-parallel-size", "two"}, {"-pcp"}} {
		if _, err := ParseParallel(bad); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("ParseParallel(%q): err = %v, want one naming %s", bad, err, bad[0])
		}
	}
}

// While a launch holds its lock, its unanswered server is another apply's
// launch in progress ("launching"), not one a killed apply left; once the
// lock is released, it is.
func TestUnfinishedLaunchWhileLocked(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock not on this machine")
	}
	private := filepath.Join(t.TempDir(), "tps")
	dir := filepath.Join(private, "vllm-8000")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	hold := exec.Command("/bin/sh", "-c", LaunchLockScript, "sh", dir)
	stdin, _ := hold.StdinPipe()
	stdout, _ := hold.StdoutPipe()
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("lock: %q", line)
	}
	// A second launch cannot take it.
	if out, err := exec.Command("/bin/sh", "-c", LaunchLockScript, "sh", dir).CombinedOutput(); err == nil || !strings.Contains(string(out), "another apply is launching") {
		t.Fatalf("a second launch lock: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "env"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", "-c", LaunchScript, "sh", dir, "", "apply A", "sleep", "30").Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("/bin/sh", "-c", StopScript, "sh", id, "1", "1", dir).Run() })
	unfinished := func() string {
		out, err := exec.Command("/bin/sh", "-c", UnfinishedScript, "sh", "8000", private).CombinedOutput()
		if err != nil {
			t.Fatalf("unfinished: %v %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := unfinished(); got != id+"\napply A\nlaunching" {
		t.Fatalf("while locked: %q", got)
	}
	stdin.Close()
	_ = hold.Wait()
	if got := unfinished(); got != id+"\napply A" {
		t.Fatalf("after the lock was released: %q", got)
	}
}

// A server's PID reused by another program that leads a process group of
// its own (a login's job, another user's vLLM): the stop finds a process
// under the PID with another start time, and leaves it and its group be.
func TestStopLeavesTheGroupOfAReusedPID(t *testing.T) {
	child := fmt.Sprintf("sleep 32.%d", os.Getpid())
	cmd := exec.Command("setsid", "sh", "-c", child+` & exec sleep 33`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("kill", "-KILL", "--", "-"+strconv.Itoa(cmd.Process.Pid)).Run()
		_ = cmd.Wait()
	})
	for i := 0; i < 100 && running(child) == ""; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	// The identity a stopped server left: this PID, another start time.
	id := strconv.Itoa(cmd.Process.Pid) + ":1"
	if o, err := exec.Command("/bin/sh", "-c", StopScript, "sh", id, "1", "1").CombinedOutput(); err != nil {
		t.Fatalf("stop: %v %s", err, o)
	}
	if running(child) == "" || cmd.ProcessState != nil || syscall.Kill(cmd.Process.Pid, 0) != nil {
		t.Fatal("the stop of a gone server killed the process group that reuses its PID")
	}
}

// StatusFindScript, run here for real: a process that listens on a port
// is alive and found there; with nothing on the port, it is alive and
// nothing is found (FindScript's exit stays in its part); a process gone
// is gone, and nothing is looked for.
func TestStatusFindScript(t *testing.T) {
	if _, err := exec.LookPath("ss"); err != nil {
		t.Fatal("ss (iproute2) is needed: ", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	free.Close()
	// This test's own process listens on port: its identity as the scripts read it.
	self, err := exec.Command("/bin/sh", "-c", `echo "$1:$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f20)"`, "sh", strconv.Itoa(os.Getpid())).Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(self))
	run := func(identity, port string) string {
		out, err := exec.Command("/bin/sh", "-c", StatusFindScript, "sh", identity, port).Output()
		if err != nil {
			t.Fatalf("StatusFindScript %s %s: %v", identity, port, err)
		}
		return string(out)
	}
	state, found, ok := strings.Cut(run(id, port), "@@find\n")
	if strings.TrimSpace(state) != "alive" || !ok || !strings.HasPrefix(found, id+"\n") || !strings.Contains(found, "@@cmdline\n") {
		t.Errorf("a live process on its port: state %q, found %q", state, found)
	}
	if out := run(id, freePort); out != "alive\n@@find\n" {
		t.Errorf("a live process, nothing on the port: %q", out)
	}
	if out := run(strings.SplitN(id, ":", 2)[0]+":1", port); out != "gone\n" {
		t.Errorf("another start time: %q", out)
	}
}
