package lab

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// The lab's own subnets. Nothing outside them is ever addressed.
const (
	ExternalNetwork = "spark-lab-external"
	FabricNetwork   = "spark-lab-fabric"
	externalSubnet  = "172.29.10.0/24"
	externalGateway = "172.29.10.1"
	fabricSubnet    = "192.168.229.0/24"
	firstHostOctet  = 11
	containerPrefix = "spark-lab-node"
	// The SSH users, ordinary ones as lab teams have: every test and the
	// demo connect as sshUser; secondSSHUser is another user of the same
	// nodes (the multi-user tests). Both are in the docker group, which the
	// container runtime needs, and nothing else.
	sshUser       = "ops"
	secondSSHUser = "ops2"
	rayCommand    = "/opt/ray/bin/ray"
	pythonCommand = "/opt/ray/bin/python"
	vllmCommand   = "/opt/ray/bin/vllm"
	modelPath     = "/opt/ray/models/tiny-llama" // made at environment-build time (internal/lab/pyenv/make_model.py)
)

// Options configures Up.
type Options struct {
	Dir   string // where lab.json, the key and known_hosts live (.lab)
	Nodes int    // number of nodes, default 2
	// Lanes > 1 also writes lane-1.json .. lane-N.json (LanePath), each
	// with Nodes/Lanes of the nodes: CI's test lanes, run at once.
	Lanes int
	Log   func(format string, args ...any)
}

func (o *Options) defaults() {
	if o.Nodes <= 0 {
		o.Nodes = 2
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// FilePath is where Up writes the lab file inside dir.
func FilePath(dir string) string { return filepath.Join(dir, "lab.json") }

func nthIP(subnet string, n int) string {
	ip, _, _ := net.ParseCIDR(subnet)
	v4 := ip.To4()
	return net.IPv4(v4[0], v4[1], v4[2], byte(n)).String()
}

// Up brings the lab up, reusing whatever already exists, and writes lab.json.
func Up(ctx context.Context, o Options) (*File, error) {
	o.defaults()
	if o.Lanes > 1 && o.Nodes%o.Lanes != 0 {
		return nil, fmt.Errorf("lanes: %d nodes do not split into %d lanes of equal size; set NODES to a multiple of LANES", o.Nodes, o.Lanes)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	cacheDir := filepath.Join(dir, "cache")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	start := time.Now()
	o.Log("docker engine: checking")
	if err := EnsureDocker(ctx, o.Log); err != nil {
		return nil, err
	}
	phase := phaseTimer(o.Log)
	image, volumes, err := buildImages(ctx, cacheDir, o.Log, phase)
	if err != nil {
		return nil, err
	}
	keyFile, pub, err := ensureClientKey(dir)
	if err != nil {
		return nil, err
	}
	if err := ensureNetworks(ctx, o.Log); err != nil {
		return nil, err
	}
	f := newLabFile(dir, keyFile, volumes[0])
	for i := 1; i <= o.Nodes; i++ {
		n := nodeSpec(i)
		if err := ensureNode(ctx, &n, image, volumes, pub, o.Log); err != nil {
			return nil, err
		}
		f.Nodes = append(f.Nodes, n)
	}
	phase("nodes")
	if err := loadNodeImages(ctx, f.Nodes, image, o.Log); err != nil {
		return nil, err
	}
	phase("node image in nodes")
	f.NodeImage = image
	f.DockerVersion = nodeDockerVersion(ctx, f.Nodes[0])
	// Nodes beyond the requested count from an earlier, larger lab go away.
	if err := removeExtraNodes(ctx, o.Nodes, o.Log); err != nil {
		return nil, err
	}
	if err := readEnvironmentVersions(ctx, f); err != nil {
		return nil, err
	}
	if err := writeLabFiles(dir, f, o.Lanes, o.Log); err != nil {
		return nil, err
	}
	o.Log("lab up: %d nodes in %s (%s)", len(f.Nodes), FilePath(dir), time.Since(start).Round(time.Second))
	return f, nil
}

// writeLabFiles writes known_hosts, lab.json and, with lanes > 1, each
// lane's file; an earlier lab's lane files go (a lane file names only
// nodes this lab has).
func writeLabFiles(dir string, f *File, lanes int, log func(string, ...any)) error {
	if err := writeKnownHosts(f); err != nil {
		return err
	}
	if err := f.write(FilePath(dir)); err != nil {
		return err
	}
	if stale, err := filepath.Glob(filepath.Join(dir, "lane-*.json")); err == nil {
		for _, p := range stale {
			_ = os.Remove(p)
		}
	}
	if lanes <= 1 {
		return nil
	}
	files, err := f.lanes(lanes)
	if err != nil {
		return err
	}
	for i, lane := range files {
		if err := lane.write(LanePath(dir, i+1)); err != nil {
			return err
		}
	}
	log("lanes: %d lab files of %d nodes each (%s)", len(files), len(files[0].Nodes), LanePath(dir, 1))
	return nil
}

// phaseTimer returns a function that logs how long the named phase took
// since the previous one (or since phaseTimer): a new machine's lab-up is
// timed by phase.
func phaseTimer(log func(string, ...any)) func(name string) {
	t := time.Now()
	return func(name string) {
		log("timing: %-20s %s", name, time.Since(t).Round(time.Second))
		t = time.Now()
	}
}

// buildImages makes the base image, the Python environment volumes (one
// per environment, in the order of pyenvs) and the node image, each once.
// On a new machine most of it is downloading (about 7 GB of wheels, the
// Debian packages) and the rest installing: every environment's wheels are
// fetched at once, beside debootstrap, and each environment installs as soon
// as the base image and its own wheels are there.
func buildImages(ctx context.Context, cacheDir string, log func(string, ...any), phase func(string)) (image string, volumes []string, err error) {
	wheels := make([]func() (string, error), len(pyenvs))
	for i, env := range pyenvs {
		wheels[i] = startWheels(ctx, cacheDir, env, log)
	}
	base, err := ensureBaseImage(ctx, cacheDir, log)
	if err != nil {
		return "", nil, err
	}
	phase("base image")
	for i, env := range pyenvs {
		v, err := ensurePyenv(ctx, base, cacheDir, env, wheels[i], log)
		if err != nil {
			return "", nil, err
		}
		volumes = append(volumes, v)
	}
	phase("python environments")
	image, err = ensureNodeImage(ctx, base, cacheDir, log)
	if err != nil {
		return "", nil, err
	}
	phase("node image")
	return image, volumes, nil
}

// newLabFile is the lab file before any node is added: what every node
// shares.
func newLabFile(dir, keyFile, pyenv string) *File {
	return &File{
		SSHUser:        sshUser,
		SecondSSHUser:  secondSSHUser,
		PrivateKeyFile: keyFile,
		KnownHostsFile: filepath.Join(dir, "known_hosts"),
		ExternalSubnet: externalSubnet,
		FabricSubnet:   fabricSubnet,
		RayVersion:     RayVersion(),
		PyenvVolume:    pyenv,
	}
}

// nodeSpec is the i-th node (from 1): its names and its addresses on both
// lab networks, reached over SSH on its external address.
func nodeSpec(i int) Node {
	n := Node{
		Name:          fmt.Sprintf("spark%d", i),
		Container:     fmt.Sprintf("%s%d", containerPrefix, i),
		ExternalIP:    nthIP(externalSubnet, firstHostOctet+i-1),
		FabricIP:      nthIP(fabricSubnet, firstHostOctet+i-1),
		SSHPort:       22,
		RayCommand:    rayCommand,
		PythonCommand: pythonCommand,
		VLLMCommand:   vllmCommand,
		ModelPath:     modelPath,
	}
	n.SSHHost = n.ExternalIP
	return n
}

// nodeDockerVersion is the version of the Docker engine inside node n, ""
// when it does not answer.
func nodeDockerVersion(ctx context.Context, n Node) string {
	dv, err := docker(ctx, nil, "exec", n.Container, "docker", "--version")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.Fields(dv)[2], ",")
}

// readEnvironmentVersions records the Python and vLLM versions of both
// environments as the first node really runs them, and where the second
// environment's commands are.
func readEnvironmentVersions(ctx context.Context, f *File) error {
	node := f.Nodes[0]
	out, err := docker(ctx, nil, "exec", node.Container, pythonCommand, "-c",
		"import platform; from importlib.metadata import version; print(platform.python_version(), version('vllm'))")
	if err != nil {
		return fmt.Errorf("read the Python and vLLM versions on %s: %w", node.Name, err)
	}
	if v := strings.Fields(out); len(v) == 2 {
		f.PythonVersion, f.VLLMVersion = v[0], v[1]
	}
	second := pyenvs[1].mount
	f.SecondVLLM = Environment{RayCommand: second + "/bin/ray", PythonCommand: second + "/bin/python",
		VLLMCommand: second + "/bin/vllm", ModelPath: second + "/models/tiny-llama"}
	out, err = docker(ctx, nil, "exec", node.Container, f.SecondVLLM.PythonCommand, "-c",
		"from importlib.metadata import version; print(version('vllm'))")
	if err != nil {
		return fmt.Errorf("read the second environment's vLLM version on %s: %w", node.Name, err)
	}
	f.SecondVLLM.VLLMVersion = strings.TrimSpace(out)
	f.SecondRay = RayRelease{RayCommand: rayNextMount + "/bin/ray", PythonCommand: rayNextMount + "/bin/python"}
	out, err = docker(ctx, nil, "exec", node.Container, f.SecondRay.PythonCommand, "-c",
		"from importlib.metadata import version; print(version('ray'))")
	if err != nil {
		return fmt.Errorf("read the second Ray release on %s: %w", node.Name, err)
	}
	f.SecondRay.RayVersion = strings.TrimSpace(out)
	return nil
}

func ensureNetworks(ctx context.Context, log func(string, ...any)) error {
	nets := []struct {
		name string
		args []string
	}{
		{ExternalNetwork, []string{"--subnet", externalSubnet, "--gateway", externalGateway}},
		// internal: no route out; inhibit_ipv4: the host bridge gets no address,
		// so the host cannot reach fabric addresses, as on a real Spark pair.
		{FabricNetwork, []string{"--internal", "--subnet", fabricSubnet, "-o", "com.docker.network.bridge.inhibit_ipv4=true"}},
	}
	for _, n := range nets {
		if _, err := docker(ctx, nil, "network", "inspect", n.name); err == nil {
			continue
		}
		log("network %s: creating", n.name)
		args := append([]string{"network", "create", "--driver", "bridge", "--label", labLabel + "=1"}, n.args...)
		if _, err := docker(ctx, nil, append(args, n.name)...); err != nil {
			return err
		}
	}
	return nil
}

func ensureNode(ctx context.Context, n *Node, image string, volumes []string, authorizedKey string, log func(string, ...any)) error {
	pyenv := strings.Join(volumes, ",")
	state, err := docker(ctx, nil, "inspect", "--format", `{{.State.Running}} {{.Config.Image}} {{index .Config.Labels "`+pyenvLabel+`"}}`, n.Container)
	want := " " + image + " " + pyenv
	switch {
	case err == nil && state == "true"+want:
		log("node %s (%s): running", n.Name, n.Container)
	case err == nil && strings.HasSuffix(state, want):
		log("node %s: starting", n.Name)
		if _, err := docker(ctx, nil, "start", n.Container); err != nil {
			return err
		}
	default:
		if err == nil {
			log("node %s: image or python environment changed, recreating", n.Name)
			if _, err := docker(ctx, nil, "rm", "-f", "-v", n.Container); err != nil {
				return err
			}
		}
		log("node %s: creating %s (external %s, fabric %s)", n.Name, n.Container, n.ExternalIP, n.FabricIP)
		// The flags let the node run systemd as PID 1 and its own Docker
		// engine without --privileged (nodeimage/node-init): a private
		// cgroup namespace, and /run on tmpfs as systemd wants it.
		args := []string{"run", "-d", "--name", n.Container, "--hostname", n.Name,
			"--label", labLabel + "=1", "--label", pyenvLabel + "=" + pyenv, "--shm-size", "2g",
			"--cap-add=ALL", "--cap-drop=SYS_RESOURCE",
			"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
			"--cgroupns", "private", "--tmpfs", "/run", "--tmpfs", "/run/lock", "-v", "/var/lib/docker",
			"--stop-signal", "SIGRTMIN+3", // systemd's "shut down"
			"--entrypoint", "/usr/local/sbin/node-init",
			"--network", ExternalNetwork, "--ip", n.ExternalIP}
		for i, env := range pyenvs { // each environment, read-only where it lives
			args = append(args, "-v", volumes[i]+":"+env.mount+":ro")
		}
		if _, err := docker(ctx, nil, append(args, image)...); err != nil {
			return err
		}
		if _, err := docker(ctx, nil, "network", "connect", "--ip", n.FabricIP, FabricNetwork, n.Container); err != nil {
			return err
		}
	}
	// The ordinary users and root (for an operator exploring) get the key:
	// added, not replaced, since several checkouts (a CI clone beside a
	// working copy) may share the one lab, each with its own key.
	if _, err := docker(ctx, strings.NewReader(authorizedKey), "exec", "-i", n.Container, "sh", "-c", authorizeScript,
		"sh", sshUser, secondSSHUser); err != nil {
		return err
	}
	return waitHostKey(ctx, n)
}

// authorizeScript makes the ordinary users ($@: home, login shell, the
// docker group) and puts the key on stdin in their authorized_keys and
// root's. The first one lingers (its systemd user manager runs from boot,
// so its units come back after a restart of the node), as an operator
// sets up a serving account once with "loginctl enable-linger"; the
// second does not, as most accounts do not.
const authorizeScript = `set -eu
key=$(cat)
for u in "$@"; do
  id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash -G docker "$u"
  # No password, but not locked: sshd (without PAM) refuses even a key to
  # a locked account ("!"), which is how useradd leaves it.
  usermod -p '*' "$u"
done
for home in /root $(for u in "$@"; do getent passwd "$u" | cut -d: -f6; done); do
  owner=$(stat -c %U "$home")
  install -d -m 0700 -o "$owner" -g "$owner" "$home/.ssh"
  f="$home/.ssh/authorized_keys"
  touch "$f"
  grep -qxF "$key" "$f" || printf '%s\n' "$key" >> "$f"
  chown "$owner:$owner" "$f"
  chmod 0600 "$f"
done
install -d /var/lib/systemd/linger && touch "/var/lib/systemd/linger/$1"
# logind reads the linger files when it starts; one already running is told.
for i in $(seq 40); do loginctl enable-linger "$1" 2>/dev/null && break; sleep 0.25; done`

// waitHostKey waits for the node's first-boot host key and sshd's port.
func waitHostKey(ctx context.Context, n *Node) error {
	var last error
	for i := 0; i < 60; i++ {
		key, err := docker(ctx, nil, "exec", n.Container, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
		if err == nil {
			if c, derr := net.DialTimeout("tcp", net.JoinHostPort(n.SSHHost, fmt.Sprint(n.SSHPort)), time.Second); derr == nil {
				c.Close()
				fields := strings.Fields(key)
				n.HostKey = fields[0] + " " + fields[1]
				return nil
			} else {
				err = derr
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("node %s: sshd did not come up: %w", n.Name, last)
}

func removeExtraNodes(ctx context.Context, want int, log func(string, ...any)) error {
	out, err := docker(ctx, nil, "ps", "-a", "--filter", "label="+labLabel, "--format", "{{.Names}}")
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(out) {
		var i int
		if _, err := fmt.Sscanf(name, containerPrefix+"%d", &i); err == nil && i > want {
			log("node %s: removing (lab now has %d nodes)", name, want)
			if _, err := docker(ctx, nil, "rm", "-f", "-v", name); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadNodeImages loads the node image into every node at once: each load
// is one node's own engine unpacking it (about 30 s on a new lab), which
// one core does.
func loadNodeImages(ctx context.Context, nodes []Node, image string, log func(string, ...any)) error {
	errs := make([]error, len(nodes))
	var loads sync.WaitGroup
	for i, n := range nodes {
		loads.Add(1)
		go func() {
			defer loads.Done()
			errs[i] = loadNodeImage(ctx, n, image, log)
		}()
	}
	loads.Wait()
	return errors.Join(errs...)
}

// loadNodeImage puts the node image into the node's own Docker engine (no
// registry is reachable): the container runtime then runs Ray and the vLLM
// stand-in from it, inside the node.
func loadNodeImage(ctx context.Context, n Node, image string, log func(string, ...any)) error {
	if err := waitNodeDocker(ctx, n); err != nil {
		return err
	}
	if _, err := docker(ctx, nil, "exec", n.Container, "docker", "image", "inspect", image); err == nil {
		return nil
	}
	log("node %s: loading %s into the node's Docker engine", n.Name, image)
	cmd := exec.CommandContext(ctx, "sh", "-c", `docker save "$1" | docker exec -i "$2" docker load -q`, "sh", image, n.Container)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("load %s into %s: %w: %s", image, n.Name, err, tail(string(out), 10))
	}
	return nil
}

// waitNodeDocker waits (bounded) for the Docker engine inside a node.
func waitNodeDocker(ctx context.Context, n Node) error {
	var last error
	for i := 0; i < 60; i++ {
		if _, last = docker(ctx, nil, "exec", n.Container, "docker", "info"); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("node %s: its Docker engine did not start: %w", n.Name, last)
}

// ensureClientKey creates the lab's SSH client key once and reuses it.
func ensureClientKey(dir string) (path, authorized string, err error) {
	path = filepath.Join(dir, "id_ed25519")
	if b, err := os.ReadFile(path); err == nil {
		signer, err := ssh.ParsePrivateKey(b)
		if err == nil {
			return path, string(ssh.MarshalAuthorizedKey(signer.PublicKey())), nil
		}
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "spark-lab")
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", "", err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return "", "", err
	}
	pub := ssh.MarshalAuthorizedKey(signer.PublicKey())
	return path, string(pub), os.WriteFile(path+".pub", pub, 0o644)
}

// writeKnownHosts writes the lab's known_hosts by rename, so an SSH client
// of another test lane reading it at that moment reads a whole file.
func writeKnownHosts(f *File) error {
	var b strings.Builder
	for _, n := range f.Nodes {
		fmt.Fprintf(&b, "%s %s\n", n.SSHHost, n.HostKey)
	}
	return writeByRename(f.KnownHostsFile, []byte(b.String()))
}

// RegenerateHostKey gives a node a new host key, as a reinstalled box would
// have, and updates the lab's known_hosts and every lab file in dir (the
// whole lab's and each lane's) to match. Test lanes run at once: the update
// holds dir's lock, and each file is replaced by rename.
func RegenerateHostKey(ctx context.Context, dir, name string) (string, error) {
	f, err := Load(FilePath(dir))
	if err != nil {
		return "", err
	}
	n, ok := f.Node(name)
	if !ok {
		return "", fmt.Errorf("no lab node named %q", name)
	}
	// sshd re-execs on SIGHUP and loads the new key.
	if _, err := docker(ctx, nil, "exec", n.Container, "sh", "-c",
		"rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub && ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key && pkill -HUP -x sshd"); err != nil {
		return "", err
	}
	old := n.HostKey
	for j := 0; j < 40; j++ {
		if err := waitHostKey(ctx, &n); err != nil {
			return "", err
		}
		if n.HostKey != old {
			break
		}
	}
	time.Sleep(500 * time.Millisecond) // sshd's re-exec after SIGHUP
	return n.HostKey, recordHostKey(dir, name, n.HostKey)
}

// recordHostKey sets node name's host key in every lab file in dir and in
// known_hosts, under dir's lock.
func recordHostKey(dir, name, key string) error {
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	files, err := filepath.Glob(filepath.Join(dir, "lane-*.json"))
	if err != nil {
		return err
	}
	for _, path := range append([]string{FilePath(dir)}, files...) {
		lf, err := Load(path)
		if err != nil {
			return err
		}
		for i := range lf.Nodes {
			if lf.Nodes[i].Name == name {
				lf.Nodes[i].HostKey = key
			}
		}
		if path == FilePath(dir) {
			if err := writeKnownHosts(lf); err != nil {
				return err
			}
		}
		if err := lf.write(path); err != nil {
			return err
		}
	}
	return nil
}

// Down removes everything the lab created (found by label), and nothing else.
func Down(ctx context.Context, log func(string, ...any)) error {
	if !engineAnswers(ctx) {
		log("no Docker engine answers: nothing to remove")
		return nil
	}
	out, err := docker(ctx, nil, "ps", "-a", "--filter", "label="+labLabel, "--format", "{{.Names}}")
	if err != nil {
		return err
	}
	if names := strings.Fields(out); len(names) > 0 {
		log("removing containers: %s", strings.Join(names, " "))
		if _, err := docker(ctx, nil, append([]string{"rm", "-f", "-v"}, names...)...); err != nil {
			return err
		}
	}
	out, err = docker(ctx, nil, "network", "ls", "--filter", "label="+labLabel, "--format", "{{.Name}}")
	if err != nil {
		return err
	}
	if names := strings.Fields(out); len(names) > 0 {
		log("removing networks: %s", strings.Join(names, " "))
		if _, err := docker(ctx, nil, append([]string{"network", "rm"}, names...)...); err != nil {
			return err
		}
	}
	log("lab down (images kept as a build cache; `docker image rm` them by label %s to reclaim space)", labLabel)
	return nil
}

// Exec runs argv inside a lab node's container (for tests that look at the
// node itself, beside the provider's SSH view) and returns its stdout.
func Exec(ctx context.Context, n Node, argv ...string) (string, error) {
	return docker(ctx, nil, append([]string{"exec", n.Container}, argv...)...)
}

// ExecAs runs argv inside a lab node's container as user, with that
// user's home: what the provider's SSH user has there (its Ray token, its
// files).
func ExecAs(ctx context.Context, n Node, user string, argv ...string) (string, error) {
	return docker(ctx, nil, append([]string{"exec", "-u", user, "-w", "/", n.Container, "sh", "-c", `HOME=$(getent passwd "$(id -un)" | cut -d: -f6) exec "$@"`, "sh"}, argv...)...)
}

// Disconnect takes a node off one of the lab networks; Connect puts it back
// with its fixed address.
func Disconnect(ctx context.Context, n Node, network string) error {
	_, err := docker(ctx, nil, "network", "disconnect", network, n.Container)
	return err
}

// Connect reattaches a node to a lab network at its fixed address.
func Connect(ctx context.Context, n Node, network string) error {
	ip := n.FabricIP
	if network == ExternalNetwork {
		ip = n.ExternalIP
	}
	_, err := docker(ctx, nil, "network", "connect", "--ip", ip, network, n.Container)
	return err
}

// FabricInterface is the name of node n's fabric port, looked up by its
// address. Docker names a port by the order it was attached in, so it is
// eth1 on a new node but another name once a test has taken the node off a
// network and put it back (Docker 20.10 cannot be told the name); a test
// that names the port asks for it, as an operator reads it off the box.
func FabricInterface(ctx context.Context, n Node) (string, error) {
	return portWith(ctx, n, "fabric", n.FabricIP)
}

// ExternalInterface is the name of node n's external port, read as
// FabricInterface reads the fabric's.
func ExternalInterface(ctx context.Context, n Node) (string, error) {
	return portWith(ctx, n, "external", n.ExternalIP)
}

// portWith is the name of the node's port that carries ip.
func portWith(ctx context.Context, n Node, network, ip string) (string, error) {
	out, err := docker(ctx, nil, "exec", n.Container, "ip", "-o", "-4", "addr", "show", "to", ip)
	if err != nil {
		return "", fmt.Errorf("find node %s's %s port: %w", n.Name, network, err)
	}
	f := strings.Fields(out)
	if len(f) < 2 {
		return "", fmt.Errorf("node %s has no port with its %s address %s", n.Name, network, ip)
	}
	return strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"), nil
}

// Pause freezes every process of a node (docker pause: the cgroup freezer),
// or thaws it: a node that stops answering while its kernel still accepts
// TCP connections, as a hung box does.
func Pause(ctx context.Context, n Node, freeze bool) (string, error) {
	verb := "unpause"
	if freeze {
		verb = "pause"
	}
	return docker(ctx, nil, verb, n.Container)
}

// Restart restarts a node's container: every process on it is gone, as
// after a reboot; sshd and its host key come back.
func Restart(ctx context.Context, n Node) error {
	if _, err := docker(ctx, nil, "restart", "-t", "2", n.Container); err != nil {
		return err
	}
	if err := waitHostKey(ctx, &n); err != nil {
		return err
	}
	return waitNodeDocker(ctx, n)
}
