package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// docker runs the docker CLI and returns trimmed stdout; errors carry stderr.
func docker(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// run runs a host command, streaming nothing; errors carry the output tail.
func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, tail(string(out), 20))
	}
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func engineAnswers(ctx context.Context) bool {
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := docker(c, nil, "info", "--format", "{{.ServerVersion}}")
	return err == nil
}

// EnsureDocker makes sure a Docker engine answers. On a fresh machine of the
// lab's kind only the client is present: as root we install Debian's docker.io
// and start dockerd ourselves; otherwise we say exactly what is missing.
func EnsureDocker(ctx context.Context, log func(string, ...any)) error {
	if engineAnswers(ctx) {
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("no Docker engine answers and this process is not root: start dockerd (or run `make lab-up` as root so the lab installs Debian's docker.io and starts it)")
	}
	if _, err := exec.LookPath("dockerd"); err != nil {
		log("installing Debian's docker.io (no Docker engine on this machine)")
		if err := aptInstall(ctx, "docker.io"); err != nil {
			return err
		}
	}
	log("starting dockerd (log: /var/log/spark-lab-dockerd.log)")
	logf, err := os.OpenFile("/var/log/spark-lab-dockerd.log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("dockerd")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = detached()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start dockerd: %w", err)
	}
	_ = cmd.Process.Release()
	for i := 0; i < 60; i++ {
		if engineAnswers(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	b, _ := os.ReadFile("/var/log/spark-lab-dockerd.log")
	return fmt.Errorf("dockerd did not answer within 60s; its log ends:\n%s", tail(string(b), 20))
}

func aptInstall(ctx context.Context, pkgs ...string) error {
	if err := run(ctx, "apt-get", "update", "-qq"); err != nil {
		return err
	}
	args := append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %s: %w: %s", strings.Join(pkgs, " "), err, tail(string(out), 20))
	}
	return nil
}
