package lab

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// nodeimage: the node image's recipe; pyenv: the Python environment (Ray,
// vLLM, the lab's platform plugin, the tiny model) mounted at /opt/ray;
// pyenv011: the second one, vLLM 0.11.0, mounted at /opt/vllm-0.11.
//
//go:embed nodeimage all:pyenv all:pyenv011 all:pyenvray
var labFiles embed.FS

const (
	debianSuite = "bookworm"
	labLabel    = "spark-lab"
)

// basePackages is what debootstrap puts in the base image: sshd for the
// provider, python3 + venv for Ray, iproute2 for the interface/route facts,
// procps for pgrep/pkill, libnuma1 for vLLM's CPU kernels (vllm._C), g++ and
// python3-dev for the kernels torch's inductor compiles when vLLM runs tensor
// parallel on CPU ("No working C++ compiler", then "Python.h: No such file"
// without them), systemd as PID 1 with logind (lingering user managers) and
// D-Bus, as on DGX OS (nodeimage/node-init), dumb-init to reap orphaned Ray
// processes in the containers the container runtime runs from this same
// image, a Docker engine
// so the container runtime runs for real inside each node, and rsync, which
// Ray's cluster launcher (`ray up`, the yardstick of `make bench`) needs on
// every node it starts.
var basePackages = []string{
	"openssh-server", "python3", "python3-venv", "iproute2", "procps",
	"systemd", "systemd-sysv", "libpam-systemd", "dbus", "dumb-init", "ca-certificates", "util-linux", "docker.io", "libnuma1", "g++", "python3-dev", "rsync",
}

// recipeHash names an image by everything that goes into it, so a changed
// recipe builds a new image and an unchanged one is reused.
func recipeHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func imageExists(ctx context.Context, tag string) bool {
	_, err := docker(ctx, nil, "image", "inspect", "--format", "{{.Id}}", tag)
	return err == nil
}

// debianMirror reads the mirror this machine's apt already uses, so the lab
// reaches exactly the package registry the machine is allowed to reach.
func debianMirror() (string, error) {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	files = append(files, "/etc/apt/sources.list")
	re := regexp.MustCompile(`^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)`)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if m := re.FindStringSubmatch(line); m != nil && !strings.Contains(m[1], "security") {
				fh.Close()
				return m[1], nil
			}
		}
		fh.Close()
	}
	return "", fmt.Errorf("no Debian mirror found in /etc/apt sources")
}

// baseTag names the base image by its recipe.
func baseTag() string {
	return "spark-lab-base:" + recipeHash(debianSuite, "minbase", strings.Join(basePackages, ","))
}

// ensureBaseImage builds a Debian base image with debootstrap + docker import
// (no container registry is reachable from lab machines).
func ensureBaseImage(ctx context.Context, cacheDir string, log func(string, ...any)) (string, error) {
	tag := baseTag()
	if imageExists(ctx, tag) {
		log("base image %s: cached", tag)
		return tag, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		log("installing debootstrap")
		if err := aptInstall(ctx, "debootstrap"); err != nil {
			return "", err
		}
	}
	mirror, err := debianMirror()
	if err != nil {
		return "", err
	}
	root := filepath.Join(cacheDir, "rootfs")
	_ = os.RemoveAll(root)
	log("base image %s: debootstrap %s (first build takes a few minutes)", tag, debianSuite)
	if err := run(ctx, "debootstrap", "--variant=minbase", "--include="+strings.Join(basePackages, ","), debianSuite, root, mirror); err != nil {
		return "", err
	}
	defer os.RemoveAll(root)
	// Keep images small and the Docker context clean.
	for _, p := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		matches, _ := filepath.Glob(filepath.Join(root, p, "*"))
		for _, m := range matches {
			_ = os.RemoveAll(m)
		}
	}
	log("base image %s: docker import", tag)
	cmd := exec.CommandContext(ctx, "sh", "-c", `tar -C "$1" -c . | docker import --change "LABEL $2=1" - "$3"`, "sh", root, labLabel, tag)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker import: %w: %s", err, tail(string(out), 10))
	}
	return tag, nil
}

// requirements returns the pinned requirements of a Python environment
// (its recipe folder).
func requirements(folder string) (string, error) {
	b, err := labFiles.ReadFile(folder + "/requirements.txt")
	return string(b), err
}

// pinned returns the version the first environment pins for a distribution.
func pinned(dist string) string {
	req, _ := requirements("pyenv")
	for _, l := range strings.Split(req, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), dist+"=="); ok {
			return v
		}
	}
	return ""
}

// RayVersion is the Ray version the lab's environment pins.
func RayVersion() string { return pinned("ray") }

// wheelPlatforms are the platform tags pip may pick wheels for: the lab's
// nodes are Debian bookworm (glibc 2.36) on x86_64. pip does not widen a
// --platform of manylinux_2_36 to older glibc tags by itself.
func wheelPlatforms() []string {
	var out []string
	for minor := 36; minor >= 5; minor-- {
		out = append(out, "--platform", fmt.Sprintf("manylinux_2_%d_x86_64", minor))
	}
	return append(out, "--platform", "manylinux2014_x86_64", "--platform", "manylinux2010_x86_64", "--platform", "manylinux1_x86_64")
}

// pyenvVolume names an environment's volume by its recipe and its base.
func pyenvVolume(base string, env pyenvSpec) string {
	recipe := []string{base}
	for _, f := range env.stages {
		recipe = append(recipe, recipeOf(f)...)
	}
	return "spark-lab-" + env.folder + "-" + recipeHash(recipe...)
}

// volumeExists is true when Docker has the named volume (complete or not:
// ensurePyenv looks inside).
func volumeExists(ctx context.Context, name string) bool {
	_, err := docker(ctx, nil, "volume", "inspect", "--format", "{{.Name}}", name)
	return err == nil
}

// startWheels returns where env's wheels are, once fetched. They are
// fetched at once, in the background (buildImages starts every
// environment's together), unless env's volume is there already: then only
// if ensurePyenv finds it incomplete and asks.
func startWheels(ctx context.Context, cacheDir string, env pyenvSpec, log func(string, ...any)) func() (string, error) {
	fetch := func() (string, error) { return ensureWheels(ctx, cacheDir, env.folder, log) }
	if volumeExists(ctx, pyenvVolume(baseTag(), env)) {
		return fetch
	}
	done := make(chan struct{})
	var dir string
	var err error
	go func() {
		defer close(done)
		dir, err = fetch()
	}()
	return func() (string, error) {
		<-done
		return dir, err
	}
}

// ensureWheels downloads the pinned wheels on the host (PyPI is reachable
// from the host; the environment build then needs no network).
func ensureWheels(ctx context.Context, cacheDir, folder string, log func(string, ...any)) (string, error) {
	req, err := requirements(folder)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, "wheels-"+recipeHash(req))
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	reqFile := filepath.Join(dir, "requirements.txt")
	if err := os.WriteFile(reqFile, []byte(req), 0o644); err != nil {
		return "", err
	}
	// Wheels an earlier recipe fetched are reused: pip download skips a file
	// that is already there, so a changed pin fetches only what changed.
	// Only from a complete folder: another environment's download, under
	// way beside this one, may be writing a wheel under its final name.
	done, _ := filepath.Glob(filepath.Join(cacheDir, "wheels-*", ".complete"))
	for _, c := range done {
		others, _ := filepath.Glob(filepath.Join(filepath.Dir(c), "*.whl"))
		for _, w := range others {
			_ = os.Link(w, filepath.Join(dir, filepath.Base(w)))
		}
	}
	log("downloading the wheels of %s", folder)
	start := time.Now()
	defer func() { log("timing: %-20s %s", "wheels "+folder, time.Since(start).Round(time.Second)) }()
	args := append([]string{"-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
		"--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3", "--abi", "none"}, wheelPlatforms()...)
	if err := run(ctx, "python3", append(args, "-d", dir, "-r", reqFile)...); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644)
}

// stage writes an embedded folder of the recipe to a new temporary folder.
func stage(cacheDir, folder string) (string, error) {
	dir, err := os.MkdirTemp(cacheDir, folder+"-")
	if err != nil {
		return "", err
	}
	err = fs.WalkDir(labFiles, folder, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, strings.TrimPrefix(p, folder))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := labFiles.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o755)
	})
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	// docker run -v needs the folder readable by the container's root only,
	// but MkdirTemp makes it 0700 for us: that is fine, we are root.
	return dir, nil
}

// recipeOf is everything an embedded folder contributes to a recipe hash.
func recipeOf(folder string) []string {
	var out []string
	_ = fs.WalkDir(labFiles, folder, func(p string, d fs.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			b, _ := labFiles.ReadFile(p)
			out = append(out, p, string(b))
		}
		return nil
	})
	return out
}

// ensureNodeImage turns the base image into a node image by running the
// install script in a container and committing it (no `docker build`, so no
// builder or registry is involved).
func ensureNodeImage(ctx context.Context, base, cacheDir string, log func(string, ...any)) (string, error) {
	tag := "spark-lab-node:" + recipeHash(append([]string{base}, recipeOf("nodeimage")...)...)
	if imageExists(ctx, tag) {
		log("node image %s: cached", tag)
		return tag, nil
	}
	log("node image %s: building", tag)
	builder := "spark-lab-build-" + recipeHash(tag)
	_, _ = docker(ctx, nil, "rm", "-f", builder)
	if _, err := docker(ctx, nil, "run", "-d", "--name", builder, "--label", labLabel+"=1", "--network", "none", base, "sleep", "infinity"); err != nil {
		return "", err
	}
	defer func() { _, _ = docker(context.Background(), nil, "rm", "-f", builder) }()
	staged, err := stage(cacheDir, "nodeimage")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(staged)
	if _, err := docker(ctx, nil, "cp", staged+"/.", builder+":/tmp/nodeimage"); err != nil {
		return "", err
	}
	if _, err := docker(ctx, nil, "exec", builder, "sh", "/tmp/nodeimage/install.sh"); err != nil {
		return "", err
	}
	if _, err := docker(ctx, nil, "commit",
		// The image's own entrypoint is for the containers the container
		// runtime runs from it inside a node (`docker run -d IMAGE sleep
		// infinity`: dumb-init reaps orphaned Ray processes there); a lab
		// node itself starts node-init (systemd) instead (ensureNode).
		"--change", `ENTRYPOINT ["/usr/bin/dumb-init", "--"]`,
		"--change", `CMD ["sleep", "infinity"]`,
		"--change", "ENV container=docker", // systemd knows it runs in a container
		"--change", "LABEL "+labLabel+"=1",
		"--change", "ENV PATH=/opt/ray/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		builder, tag); err != nil {
		return "", err
	}
	return tag, nil
}

// pyenvLabel marks the Python environment volumes (its value: the recipe
// folder), so an outdated one can be found and removed once its successor
// is built.
const pyenvLabel = labLabel + ".pyenv"

// pyenvSpec is one of the lab's Python environments: a recipe folder whose
// install.sh builds it into a volume that every node mounts read-only.
type pyenvSpec struct {
	folder string   // recipe folder (requirements.txt, install.sh)
	mount  string   // where it lives on the nodes
	stages []string // recipe folders the install sees at /tmp/<folder>, its own included
}

// The lab's environments: the first (vLLM 0.32.0, Ray 2.52.1) at /opt/ray;
// vLLM 0.11.0, whose Ray executor pins by default, at /opt/vllm-0.11 (it
// uses the first's platform plugin and model maker); and the newest Ray
// (2.60.0, no vLLM) at /opt/ray-next, for the Ray-reading tests on a second
// release.
var pyenvs = []pyenvSpec{
	{folder: "pyenv", mount: "/opt/ray", stages: []string{"pyenv"}},
	{folder: "pyenv011", mount: "/opt/vllm-0.11", stages: []string{"pyenv", "pyenv011"}},
	{folder: "pyenvray", mount: rayNextMount, stages: []string{"pyenvray"}},
}

// rayNextMount is where the second Ray release lives on every node.
const rayNextMount = "/opt/ray-next"

// ensurePyenv builds a Python environment — real Ray and real vLLM (its CPU
// build), the lab's vLLM platform plugin and the tiny model — into a Docker
// volume named by its recipe, once. Every node mounts it read-only, and the
// container runtime's containers mount it from their node: one copy of each
// multi-GB environment on disk, instead of an image loaded into every
// node's own Docker engine.
func ensurePyenv(ctx context.Context, base, cacheDir string, env pyenvSpec, wheelsOf func() (string, error), log func(string, ...any)) (string, error) {
	volume := pyenvVolume(base, env)
	if _, err := docker(ctx, nil, "run", "--rm", "--network", "none", "-v", volume+":"+env.mount+":ro", base,
		"test", "-f", env.mount+"/.complete"); err == nil {
		log("python environment %s: cached", volume)
		return volume, nil
	}
	wheels, err := wheelsOf()
	if err != nil {
		return "", err
	}
	args := []string{"run", "--rm", "--network", "none", "--label", labLabel + "=1",
		"-v", volume + ":" + env.mount, "-v", wheels + ":/tmp/wheels:ro"}
	for _, f := range env.stages {
		staged, err := stage(cacheDir, f)
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(staged)
		args = append(args, "-v", staged+":/tmp/"+f+":ro")
	}
	log("python environment %s: installing (%s)", volume, env.folder)
	if _, err := docker(ctx, nil, "volume", "create", "--label", labLabel+"=1", "--label", pyenvLabel+"="+env.folder, volume); err != nil {
		return "", err
	}
	if _, err := docker(ctx, nil, append(args, base, "sh", "/tmp/"+env.folder+"/install.sh")...); err != nil {
		return "", err
	}
	// Earlier environments of this recipe folder (by name: volumes of older
	// labs carry another label value) go, unless a node still uses one: each
	// is several GB.
	if out, err := docker(ctx, nil, "volume", "ls", "-q", "--filter", "label="+pyenvLabel); err == nil {
		for _, v := range strings.Fields(out) {
			if v != volume && strings.HasPrefix(v, "spark-lab-"+env.folder+"-") {
				if _, err := docker(ctx, nil, "volume", "rm", v); err == nil {
					log("python environment %s: removed (outdated)", v)
				}
			}
		}
	}
	return volume, nil
}
