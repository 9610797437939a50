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
	"sort"
	"strings"
)

//go:embed nodeimage
var nodeImage embed.FS

const (
	debianSuite = "bookworm"
	labLabel    = "spark-lab"
)

// basePackages is what debootstrap puts in the base image: sshd for the
// provider, python3 + venv for Ray, iproute2 for the interface/route facts,
// procps for pgrep/pkill, dumb-init to reap orphaned Ray processes, and a
// Docker engine so the container runtime runs for real inside each node.
var basePackages = []string{
	"openssh-server", "python3", "python3-venv", "iproute2", "procps",
	"dumb-init", "ca-certificates", "util-linux", "docker.io",
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

// ensureBaseImage builds a Debian base image with debootstrap + docker import
// (no container registry is reachable from lab machines).
func ensureBaseImage(ctx context.Context, cacheDir string, log func(string, ...any)) (string, error) {
	tag := "spark-lab-base:" + recipeHash(debianSuite, "minbase", strings.Join(basePackages, ","))
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

// requirements returns the pinned Ray requirements baked into the node image.
func requirements() (string, error) {
	b, err := nodeImage.ReadFile("nodeimage/requirements.txt")
	return string(b), err
}

// RayVersion is the Ray version the node image pins.
func RayVersion() string {
	req, _ := requirements()
	for _, l := range strings.Split(req, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "ray=="); ok {
			return v
		}
	}
	return ""
}

// StandinVersion is what the lab's vLLM stand-in reports as its version.
func StandinVersion() string {
	b, _ := nodeImage.ReadFile("nodeimage/vllm")
	m := regexp.MustCompile(`STANDIN_VERSION = "([^"]+)"`).FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// ensureWheels downloads the pinned wheels on the host (PyPI is reachable
// from the host; the image build then needs no network).
func ensureWheels(ctx context.Context, cacheDir string, log func(string, ...any)) (string, error) {
	req, err := requirements()
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
	log("downloading Ray %s wheels for the node image", RayVersion())
	py := "python3"
	if err := run(ctx, py, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
		"--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--platform", "manylinux2014_x86_64",
		"-d", dir, "-r", reqFile); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644)
}

// ensureNodeImage turns the base image into a node image by running the
// install script in a container and committing it (no `docker build`, so no
// builder or registry is involved).
func ensureNodeImage(ctx context.Context, cacheDir string, log func(string, ...any)) (string, error) {
	base, err := ensureBaseImage(ctx, cacheDir, log)
	if err != nil {
		return "", err
	}
	wheels, err := ensureWheels(ctx, cacheDir, log)
	if err != nil {
		return "", err
	}
	recipe := []string{base}
	_ = fs.WalkDir(nodeImage, "nodeimage", func(p string, d fs.DirEntry, _ error) error {
		if !d.IsDir() {
			b, _ := nodeImage.ReadFile(p)
			recipe = append(recipe, p, string(b))
		}
		return nil
	})
	tag := "spark-lab-node:" + recipeHash(recipe...)
	if imageExists(ctx, tag) {
		log("node image %s: cached", tag)
		return tag, nil
	}
	log("node image %s: installing Ray %s", tag, RayVersion())
	builder := "spark-lab-build-" + recipeHash(tag)
	_, _ = docker(ctx, nil, "rm", "-f", builder)
	if _, err := docker(ctx, nil, "run", "-d", "--name", builder, "--label", labLabel+"=1", "--network", "none", base, "sleep", "infinity"); err != nil {
		return "", err
	}
	defer func() { _, _ = docker(context.Background(), nil, "rm", "-f", builder) }()

	staged, err := os.MkdirTemp(cacheDir, "nodeimage-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(staged)
	entries, _ := nodeImage.ReadDir("nodeimage")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		b, _ := nodeImage.ReadFile("nodeimage/" + n)
		if err := os.WriteFile(filepath.Join(staged, n), b, 0o755); err != nil {
			return "", err
		}
	}
	if _, err := docker(ctx, nil, "cp", staged+"/.", builder+":/tmp/nodeimage"); err != nil {
		return "", err
	}
	if _, err := docker(ctx, nil, "cp", wheels+"/.", builder+":/tmp/wheels"); err != nil {
		return "", err
	}
	if _, err := docker(ctx, nil, "exec", builder, "sh", "/tmp/nodeimage/install.sh"); err != nil {
		return "", err
	}
	if _, err := docker(ctx, nil, "commit",
		"--change", `ENTRYPOINT ["/usr/bin/dumb-init", "--"]`,
		"--change", `CMD ["/usr/local/sbin/node-init"]`,
		"--change", "LABEL "+labLabel+"=1",
		"--change", "ENV PATH=/opt/ray/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		builder, tag); err != nil {
		return "", err
	}
	return tag, nil
}
