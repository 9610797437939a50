package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"time"
)

// What every simulated node has of vLLM, as the field's nodes do: vLLM
// in Ray's Python, whose own vllm/envs.py defaults the Ray executor
// variable to 1 (RayExecutorV2), and ray and vllm on the SSH user's PATH.
const (
	VLLMVersion = "0.32.0"
	// vllmExecutorSource is the facts script's vllm_executor section for it.
	vllmExecutorSource = "flag=1"
	// binDir is where ray, vllm and the Python they run in are installed.
	binDir = "/opt/ray/bin"
	// uid is the SSH user's: its private directory is
	// /tmp/terraform-provider-spark-<uid> (transport.PrivateDir).
	uid = 1000
)

// deploymentDir is in the SSH user's own directory, where a deployment on port
// keeps its env file, pid file, start marker, lock and log.
func deploymentDir(port int) string {
	return fmt.Sprintf("/tmp/terraform-provider-spark-%d/vllm-%d", uid, port)
}

// vllmServer is one `vllm serve` the provider launched on a node: a
// record, as a raylet is; it answers HTTP through the node's SSH tunnel.
type vllmServer struct {
	pid     int
	start   string   // its start time, field 22 of /proc/<pid>/stat
	cmdline []string // /proc/<pid>/cmdline: the interpreter, the vllm script, its arguments
	env     map[string]string
	host    string // --host
	port    int    // --port
	model   string
	served  string
	apiKey  string // VLLM_API_KEY in its environment
	health  int    // what /health answers
	gpus    int    // tensor x pipeline parallel size: the GPU bundles of its placement group
	pgID    string // its placement group's
}

func (v *vllmServer) identity() string { return fmt.Sprintf("%d:%s", v.pid, v.start) }

// vllmAt is the server listening on port of node i; the caller holds mu.
func (m *Model) vllmAt(i, port int) *vllmServer {
	for _, v := range m.vllms[i] {
		if v.port == port {
			return v
		}
	}
	return nil
}

// vllmByID is the server of node i with that identity; the caller holds mu.
func (m *Model) vllmByID(i int, identity string) *vllmServer {
	for _, v := range m.vllms[i] {
		if v.identity() == identity {
			return v
		}
	}
	return nil
}

// launch is LaunchScript on node i: $1 the deployment's directory (made
// by DirScript, holding the env file uploaded there), $2 an API key file,
// $3 the holder for the start marker, then the serve argv. It prints the
// new server's identity.
func (m *Model) launch(i int, args []string) (string, error) {
	if len(args) < 6 || args[4] != "serve" {
		return "", fmt.Errorf("launch: not a vllm serve command line: %q", args)
	}
	dir, keyFile, holder, argv := args[0], args[1], args[2], args[3:]
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.files[i][dir+"/pid"]; ok && m.vllmByID(i, id) != nil {
		return "", exitError{3, fmt.Sprintf("a vLLM server started by this provider is already running (process %s)", id)}
	}
	v := &vllmServer{pid: m.nextPID, health: http.StatusOK, model: argv[2], host: "0.0.0.0", port: 8000, gpus: 1,
		pgID: newNodeID()[:36]}
	m.nextPID++
	v.start = strconv.Itoa(100000 + v.pid)
	env, err := parseEnvFile(m.files[i][dir+"/env"])
	if err != nil {
		return "", err
	}
	v.env = env
	if keyFile != "" {
		key := strings.TrimSpace(m.files[i][keyFile])
		if key == "" {
			return "", exitError{4, fmt.Sprintf("api_key_file %s is empty or unreadable: vLLM would serve without authentication. "+
				"Put the key in it, or use api_key_wo", keyFile)}
		}
		v.env["VLLM_API_KEY"] = key
	}
	v.apiKey = v.env["VLLM_API_KEY"]
	if err := v.readFlags(argv[3:]); err != nil {
		return "", err
	}
	// The shell runs the vllm script through its #! line: the kernel puts
	// the interpreter first and the script as the shell found it.
	script := argv[0]
	if !strings.Contains(script, "/") {
		script = path.Join(binDir, script)
	}
	v.cmdline = append([]string{binDir + "/python3", script}, argv[1:]...)
	m.vllms[i] = append(m.vllms[i], v)
	m.files[i][dir+"/pid"] = v.identity()
	m.files[i][dir+"/starting"] = holder + "\n"
	m.files[i][dir+"/server.log"] = fmt.Sprintf("INFO vLLM API server version %s\nINFO Starting vLLM API server on http://%s:%d\n",
		VLLMVersion, v.host, v.port)
	return v.identity(), nil
}

// readFlags reads what the server listens on and serves from its flags.
func (v *vllmServer) readFlags(flags []string) error {
	v.served = v.model
	tp, pp := 1, 1
	defer func() { v.gpus = tp * pp }()
	for j := 0; j < len(flags); j++ {
		name, val, eq := strings.Cut(flags[j], "=")
		if !eq && j+1 < len(flags) && strings.HasPrefix(name, "--") {
			val = flags[j+1]
		}
		var err error
		switch name {
		case "--port":
			v.port, err = strconv.Atoi(val)
		case "--host":
			v.host = val
		case "--served-model-name":
			v.served = val
		case "--tensor-parallel-size":
			tp, err = strconv.Atoi(val)
		case "--pipeline-parallel-size":
			pp, err = strconv.Atoi(val)
		}
		if err != nil {
			return fmt.Errorf("vllm serve: %s: %w", name, err)
		}
	}
	return nil
}

// parseEnvFile reads what transport.EnvFile wrote: KEY='value' lines.
func parseEnvFile(s string) (map[string]string, error) {
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		k, quoted, ok := strings.Cut(line, "=")
		words, err := splitWords(quoted)
		if err != nil {
			return nil, fmt.Errorf("env file line %q: %w", line, err)
		}
		if !ok || len(words) > 1 {
			return nil, fmt.Errorf("env file line %q is not KEY='value'", line)
		}
		env[k] = strings.Join(words, "")
	}
	return env, nil
}

// stopVLLM is vllm.StopScript on node i: $1 the identity, $2 the port,
// $4 the directory (default the deployment's). The process goes with its
// env file and start marker, and its pid file when it names it; the port
// must then be closed.
func (m *Model) stopVLLM(i int, args []string) error {
	id, port := arg(args, 1), arg(args, 2)
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("stop: port %q", port)
	}
	dir := arg(args, 4)
	if dir == "" {
		dir = deploymentDir(p)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := m.vllmByID(i, id); v != nil && id != "" {
		m.removeVLLM(i, v)
	}
	delete(m.files[i], dir+"/env")
	delete(m.files[i], dir+"/starting")
	if m.files[i][dir+"/pid"] == id {
		delete(m.files[i], dir+"/pid")
	}
	if v := m.vllmAt(i, p); v != nil {
		return exitError{1, fmt.Sprintf("port %s is still open after stopping vLLM: %s", port, m.vllmListener(i, v))}
	}
	return nil
}

// removeVLLM ends server v; the caller holds mu. Ray removes its
// placement group, and the GCS keeps the group in its table as REMOVED.
func (m *Model) removeVLLM(i int, v *vllmServer) {
	if v.pgID != "" && v.env["RAY_ADDRESS"] != "" {
		m.removed = append(m.removed, removedGroup{gcsAddr: v.env["RAY_ADDRESS"], group: placementGroup{ID: v.pgID, State: "REMOVED",
			GPUs: float64(v.gpus), GPUsOn: map[string]float64{}, Holder: fmt.Sprintf("job %08x", v.pid+1), driverPID: v.pid + 1,
			driverIP: m.nodes[i].IP.String()}})
	}
	kept := m.vllms[i][:0]
	for _, o := range m.vllms[i] {
		if o != v {
			kept = append(kept, o)
		}
	}
	m.vllms[i] = kept
}

// vllmListener is ss's line for the server; the kernel names a script run
// through its #! line after the script.
func (m *Model) vllmListener(_ int, v *vllmServer) string {
	return fmt.Sprintf(`LISTEN 0 2048 %s:%d 0.0.0.0:* users:(("%s",pid=%d,fd=19))`, v.host, v.port, path.Base(v.cmdline[1]), v.pid)
}

// find is vllm.FindScript on node i: the identity of what listens on the
// port, the VLLM_HOST_IP, RAY_ADDRESS and executor variable of its
// environment, then its NUL-separated command line.
func (m *Model) find(i int, port string) (string, error) {
	p, err := strconv.Atoi(port)
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vllmAt(i, p)
	if err != nil || v == nil {
		return "", exitError{4, "nothing listens on port " + port}
	}
	var b strings.Builder
	b.WriteString(v.identity() + "\n")
	for _, k := range []string{"VLLM_HOST_IP", "RAY_ADDRESS", "VLLM_USE_RAY_V2_EXECUTOR_BACKEND"} {
		if val, ok := v.env[k]; ok {
			b.WriteString(k + "=" + val + "\n")
		}
	}
	b.WriteString("@@cmdline\n" + strings.Join(v.cmdline, "\x00") + "\x00")
	return b.String(), nil
}

// unfinished is vllm.UnfinishedScript on node i: the server a launch on
// port $1 started and never settled, its holder, and "launching" while
// the launch lock is held.
func (m *Model) unfinished(i int, port string) string {
	p, _ := strconv.Atoi(port)
	dir := deploymentDir(p)
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vllmByID(i, m.files[i][dir+"/pid"])
	if _, marked := m.files[i][dir+"/starting"]; !marked || v == nil {
		return ""
	}
	holder, _, _ := strings.Cut(m.files[i][dir+"/starting"], "\n") // head -n 1
	out := v.identity() + "\n" + holder + "\n"
	if m.launchLocks[i][dir] {
		out += "launching\n"
	}
	return out
}

// serveHTTP answers HTTP on conn (a tunnel the provider opened to the
// server's port) as vLLM's OpenAI server does, for as long as the
// provider keeps the connection.
func (m *Model) serveHTTP(v *vllmServer, conn io.ReadWriteCloser) {
	defer func() { _ = conn.Close() }()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		code := v.health
		m.mu.Unlock()
		if code == HealthLate {
			// A busy server: no answer until the client gives up (bounded).
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		w.WriteHeader(code)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": v.served, "object": "model",
			"created": 1764806400, "owned_by": "vllm", "root": v.model, "parent": nil, "max_model_len": 512}}})
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != v.served {
			w.WriteHeader(http.StatusNotFound)
			writeJSON(w, map[string]any{"error": map[string]any{"message": fmt.Sprintf("The model `%s` does not exist.", req.Model),
				"type": "NotFoundError", "code": 404}})
			return
		}
		writeJSON(w, map[string]any{"id": "cmpl-sim", "object": "text_completion", "created": 1764806400, "model": v.served,
			"choices": []any{map[string]any{"index": 0, "text": " hello", "logprobs": nil, "finish_reason": "length", "stop_reason": nil}},
			"usage":   map[string]any{"prompt_tokens": 2, "total_tokens": 3, "completion_tokens": 1}})
	})
	r := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		if v.apiKey != "" && strings.HasPrefix(req.URL.Path, "/v1/") && req.Header.Get("Authorization") != "Bearer "+v.apiKey {
			rec.WriteHeader(http.StatusUnauthorized)
			writeJSON(rec, map[string]any{"error": "Unauthorized"})
		} else {
			mux.ServeHTTP(rec, req)
		}
		_, _ = io.Copy(io.Discard, req.Body)
		resp := rec.Result()
		resp.ContentLength = int64(rec.Body.Len())
		if err := resp.Write(conn); err != nil {
			return
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// dialVLLM is where a tunnel to host:port on node i ends: the server
// listening there (on every address, or on that one), if any.
func (m *Model) dialVLLM(i int, host string, port int) *vllmServer {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.vllmAt(i, port)
	switch {
	case v == nil:
		return nil
	case v.host == "0.0.0.0", v.host == host, v.host == "localhost" && host == "127.0.0.1":
		return v
	}
	return nil
}

// exitError is a command that failed with a status and a message on stderr.
type exitError struct {
	status uint32
	msg    string
}

func (e exitError) Error() string { return e.msg }
