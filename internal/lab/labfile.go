// Package lab brings up and tears down the containerized, multi-homed test lab:
// Docker containers that each run a real sshd and real Ray, wired to an
// "external" network (default route, reachable from the host) and an internal
// "fabric" network (reachable only between nodes), like a pair of DGX Sparks.
//
// The acceptance tests, the demo and anyone exploring talk to the lab through
// the file it writes, .lab/lab.json.
package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
)

// File is the contract between the lab and everything above it (.lab/lab.json).
type File struct {
	SSHUser        string `json:"ssh_user"`        // an ordinary user, as lab teams connect
	SecondSSHUser  string `json:"second_ssh_user"` // another ordinary user of the same nodes, with the same key
	PrivateKeyFile string `json:"private_key_file"`
	KnownHostsFile string `json:"known_hosts_file"`
	ExternalSubnet string `json:"external_subnet"`
	FabricSubnet   string `json:"fabric_subnet"`
	RayVersion     string `json:"ray_version"`
	PythonVersion  string `json:"python_version"`
	VLLMVersion    string `json:"vllm_version"`   // real vLLM (its CPU build), as the nodes report it
	PyenvVolume    string `json:"pyenv_volume"`   // the Docker volume every node mounts read-only at /opt/ray
	DockerVersion  string `json:"docker_version"` // of the Docker engine inside each node
	NodeImage      string `json:"node_image"`     // also loaded in each node's Docker engine, for the container runtime
	Nodes          []Node `json:"nodes"`
	// SecondVLLM is the lab's second vLLM release (0.11.0, whose Ray
	// executor pins its placement group by default), the same on every
	// node, beside the first; with the same Ray.
	SecondVLLM Environment `json:"second_vllm"`
	// SecondRay is the lab's second Ray release (the newest, Ray's core
	// without vLLM), the same on every node, beside the first.
	SecondRay RayRelease `json:"second_ray"`
}

// RayRelease is one of the lab's Ray releases, as a node runs it.
type RayRelease struct {
	RayVersion    string `json:"ray_version"`
	RayCommand    string `json:"ray_command"`
	PythonCommand string `json:"python_command"`
}

// OnSecondRay is the lab as the Ray-reading tests see it on the second Ray
// release: every node runs that release's ray and python, and the file
// names its version. vLLM stays the first environment's (it is not in the
// second).
func (f *File) OnSecondRay() *File {
	g := *f
	g.RayVersion = f.SecondRay.RayVersion
	g.Nodes = append([]Node(nil), f.Nodes...)
	for i := range g.Nodes {
		g.Nodes[i].RayCommand = f.SecondRay.RayCommand
		g.Nodes[i].PythonCommand = f.SecondRay.PythonCommand
	}
	return &g
}

// Environment is one of the lab's Python environments, as a node runs it.
type Environment struct {
	VLLMVersion   string `json:"vllm_version"`
	RayCommand    string `json:"ray_command"`
	PythonCommand string `json:"python_command"`
	VLLMCommand   string `json:"vllm_command"`
	ModelPath     string `json:"model_path"`
}

// Node is one lab node as a test or an operator reaches it.
type Node struct {
	Name          string `json:"name"`
	Container     string `json:"container"`
	SSHHost       string `json:"ssh_host"`
	SSHPort       int    `json:"ssh_port"`
	ExternalIP    string `json:"external_ip"`
	FabricIP      string `json:"fabric_ip"`
	HostKey       string `json:"host_key"`
	RayCommand    string `json:"ray_command"`
	PythonCommand string `json:"python_command"`
	VLLMCommand   string `json:"vllm_command"`
	ModelPath     string `json:"model_path"` // the tiny model's directory on the node
}

// Load reads a lab file written by Up.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read lab file (bring the lab up with `make lab-up`): %w", err)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parse lab file %s: %w", path, err)
	}
	if len(f.Nodes) == 0 {
		return nil, fmt.Errorf("lab file %s lists no nodes", path)
	}
	return &f, nil
}

func (f *File) write(path string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return writeByRename(path, append(b, '\n'))
}

// writeByRename replaces path whole: a reader sees the old file or the new.
func writeByRename(path string, b []byte) error {
	tmp := fmt.Sprintf("%s.tmp%d", path, os.Getpid())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// lockDir takes dir's lock (an flock on dir/.lock, released when the
// process ends, whatever way it ends): test lanes that update the lab's
// files take turns.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// LanePath is where Up writes lane i's lab file (1-based) inside dir.
func LanePath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("lane-%d.json", i))
}

// lanes splits the lab into n lab files of equal, disjoint node sets, in
// node order: CI runs one test lane on each at once. Each lane is a whole
// lab to what reads it; nothing a lane's tests do (clearing a directory on
// every node, stopping every Ray) can reach another lane's nodes.
func (f *File) lanes(n int) ([]*File, error) {
	if n < 1 || len(f.Nodes)%n != 0 {
		return nil, fmt.Errorf("%d nodes do not split into %d lanes of equal size", len(f.Nodes), n)
	}
	per := len(f.Nodes) / n
	out := make([]*File, n)
	for i := range out {
		lane := *f
		lane.Nodes = append([]Node(nil), f.Nodes[i*per:(i+1)*per]...)
		out[i] = &lane
	}
	return out, nil
}

// Node returns the node with the given name.
func (f *File) Node(name string) (Node, bool) {
	for _, n := range f.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// UnheldFabricIP is an address on the lab's fabric subnet that no node
// holds (the subnet's highest host address; Docker hands out the lowest
// first): what a plan must refuse when a configuration names it, reached
// only inside the lab's own network.
func (f *File) UnheldFabricIP() (string, error) {
	p, err := netip.ParsePrefix(f.FabricSubnet)
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
		return "", fmt.Errorf("fabric_subnet %q: want an IPv4 prefix of /30 or wider", f.FabricSubnet)
	}
	b := p.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= 1<<(32-p.Bits()) - 2 // the broadcast address minus one
	ip := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	for _, n := range f.Nodes {
		if n.FabricIP == ip.String() {
			return "", fmt.Errorf("fabric address %s is held by %s", ip, n.Name)
		}
	}
	return ip.String(), nil
}
