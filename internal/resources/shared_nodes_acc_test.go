package resources_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

// cliState is a second Terraform state in a directory of its own, applied
// with the CLI the suite runs (TF_ACC_TERRAFORM_PATH) and this checkout's
// provider built and installed through dev_overrides: another team's
// configuration, on the same nodes, as that team runs it.
type cliState struct {
	t   *testing.T
	dir string
	env []string
}

func newCLIState(t *testing.T, config string) *cliState {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "provider")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "terraform-provider-spark"), ".")
	build.Dir = acctest.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the provider for the second state: %v\n%s", err, out)
	}
	rc := filepath.Join(dir, "dev.tfrc")
	overrides := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    %q = %q\n    %q = %q\n  }\n  direct {}\n}\n",
		"registry.terraform.io/lab-infra/spark", bin, "registry.opentofu.org/lab-infra/spark", bin)
	c := &cliState{t: t, dir: filepath.Join(dir, "state"), env: append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")}
	if err := os.WriteFile(rc, []byte(overrides), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c.write(config)
	return c
}

// write replaces the state's configuration.
func (c *cliState) write(config string) {
	c.t.Helper()
	tf := "terraform {\n  required_providers {\n    spark = { source = \"lab-infra/spark\" }\n  }\n}\n" + config
	if err := os.WriteFile(filepath.Join(c.dir, "main.tf"), []byte(tf), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// start runs the CLI with args in the background (bounded: 15 minutes);
// wait returns its output and error.
func (c *cliState) start(args ...string) (wait func() (string, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	cmd := exec.CommandContext(ctx, os.Getenv("TF_ACC_TERRAFORM_PATH"), append(args, "-no-color", "-input=false")...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	done := make(chan struct{})
	go func() {
		if err == nil {
			err = cmd.Wait()
		}
		cancel()
		close(done)
	}()
	return func() (string, error) {
		<-done
		return out.String(), err
	}
}

// must runs the CLI with args and fails the test when it fails.
func (c *cliState) must(args ...string) {
	c.t.Helper()
	if out, err := c.start(args...)(); err != nil {
		c.t.Fatalf("second state: terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// clusterLook is what one cluster runs on a node, found by its GCS port and
// its vLLM's port whoever runs it (inside a container, Ray runs as the
// container's user): its GCS server and raylets, by process name and the
// address they were given, and its vllm serve. Not Ray's worker processes
// or agents, which come and go as Ray pleases (their command lines name
// the GCS and the raylet's socket too).
func clusterLook(gcsPort, vllmPort int) acctest.Look {
	return acctest.Look(fmt.Sprintf(`ps -eo pid=,comm=,args= | awk '($2 == "gcs_server" && / --gcs_server_port=%[1]d( |$)/) || `+
		`($2 == "raylet" && / --gcs-address=[0-9.]+:%[1]d( |$)/) || /vllm serve .* --port %[2]d( |$)/'`, gcsPort, vllmPort))
}

// Two teams, two SSH users, two states, the same two nodes. Ops's cluster
// runs Ray on the host (GCS 6379, vLLM on 8000); ops2's runs in its
// containers (GCS 6380, its own Ray ports, vLLM on 8001), each applied in
// turn. An apply of one while the other's holds the node lock is refused,
// naming the other's provider process and user; once that apply is done,
// it applies. Neither's destroy touches the other's Ray, vLLM, auth token
// or container. Both servers run on the legacy executor, which keeps their
// one GPU worker on the head: the label changes below restart the workers,
// which would otherwise take a server's Ray worker with them.
func TestAccSharedNodes_twoUsersTwoStates(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	ctx := context.Background()

	theirsLab := *l
	theirsLab.SSHUser = l.SecondSSHUser
	container := fmt.Sprintf(`{ container = { image = %q, gpus = "", shm_size = "1g", ray_command = "/opt/ray/bin/ray", run_args = ["-v", "/opt/ray:/opt/ray:ro"] } }`, l.NodeImage)
	theirCluster := func(team string) string {
		return rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}, runtime: container,
			workerLines: []string{fmt.Sprintf("labels = { team = %q }", team)},
			extra: []string{"gcs_port = 6380", `start_args = ["--ray-client-server-port=10091", "--min-worker-port=20002", ` +
				`"--max-worker-port=29999", "--dashboard-port=8290", "--dashboard-agent-listen-port=52390"]`}}.config(&theirsLab) +
			deploy{hostIP: head.FabricIP, port: 8001, env: legacyExecutor}.config(&theirsLab)
	}
	ours := func(team string) string {
		return rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""},
			workerLines: []string{fmt.Sprintf("labels = { team = %q }", team)}}.config(l) + deploy{hostIP: head.FabricIP, env: legacyExecutor}.config(l)
	}
	oursLook, theirsLook := clusterLook(6379, 8000), clusterLook(6380, 8001)
	// snapshot is what a look finds, node by node: "<pid> <command line>".
	snapshot := func(look acctest.Look) map[string]string {
		found := map[string]string{}
		for _, n := range l.Nodes {
			found[n.Name] = acctest.RunningOrFail(t, n, look)
		}
		return found
	}
	theirs := newCLIState(t, theirCluster("b1"))
	t.Cleanup(func() {
		// Their state outlives ours in the last step; it goes, and leaves nothing.
		if out, err := theirs.start("destroy", "-auto-approve")(); err != nil {
			t.Errorf("second state: destroy: %v\n%s", err, out)
		}
		for _, n := range l.Nodes {
			if out, err := acctest.Running(n, theirsLook); err != nil || out != "" {
				t.Errorf("the second state's cluster still runs on %s after its destroy (%v):\n%s", n.Name, err, out)
			}
		}
	})

	// serving: a vLLM answers /health on the head's port.
	serving := func(port int) error {
		c := http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(fmt.Sprintf("http://%s:%d/health", head.SSHHost, port))
		if err != nil {
			return fmt.Errorf("vLLM on port %d: %w", port, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("vLLM on port %d: /health %d", port, resp.StatusCode)
		}
		return nil
	}
	// untouched: the other cluster runs the same processes as before, its
	// server answers, and its token and container are where they were.
	var before map[string]string
	untouched := func(look acctest.Look, port int, token func() error) func(*terraform.State) error {
		return func(*terraform.State) error {
			now := snapshot(look)
			for _, n := range l.Nodes {
				if before[n.Name] == "" || acctest.PIDs(now[n.Name]) != acctest.PIDs(before[n.Name]) {
					return fmt.Errorf("the other state's cluster on %s changed:\nbefore:\n%s\nnow:\n%s", n.Name, before[n.Name], now[n.Name])
				}
			}
			if err := serving(port); err != nil {
				return err
			}
			return token()
		}
	}
	theirToken := func() error {
		for _, n := range l.Nodes {
			if _, err := lab.Exec(ctx, n, "docker", "exec", "ray-node-6380", "sh", "-c", `test -s "$HOME/.ray/auth_token"`); err != nil {
				return fmt.Errorf("the second state's container or its Ray token is gone on %s: %w", n.Name, err)
			}
		}
		return nil
	}
	ourToken := func() error {
		for _, n := range l.Nodes {
			if _, err := lab.ExecAs(ctx, n, l.SSHUser, "sh", "-c", `test -s "$HOME/.ray/auth_token"`); err != nil {
				return fmt.Errorf("%s's Ray token is gone on %s: %w", l.SSHUser, n.Name, err)
			}
		}
		return nil
	}
	var theirApply func() (string, error)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(s *terraform.State) error {
			for _, n := range l.Nodes {
				out, err := acctest.Running(n, oursLook, acctest.RayDaemonsOf(l.SSHUser))
				if err != nil || out != "" {
					return fmt.Errorf("%s's cluster still runs on %s after its destroy (%w):\n%s", l.SSHUser, n.Name, err, out)
				}
				if _, err := lab.ExecAs(ctx, n, l.SSHUser, "sh", "-c", `test ! -e "$HOME/.ray/auth_token"`); err != nil {
					return fmt.Errorf("%s's Ray token outlives its cluster on %s", l.SSHUser, n.Name)
				}
			}
			return untouched(theirsLook, 8001, theirToken)(s)
		},
		Steps: []resource.TestStep{
			{
				// Their cluster first; ours beside it leaves it be.
				PreConfig: func() {
					theirs.must("apply", "-auto-approve")
					before = snapshot(theirsLook)
				},
				Config: ours("a1"),
				Check:  untouched(theirsLook, 8001, theirToken),
			},
			{
				// Their apply restarts their worker and holds the node lock
				// meanwhile: ours is refused, naming their provider and user.
				PreConfig: func() {
					theirs.write(theirCluster("b2"))
					theirApply = theirs.start("apply", "-auto-approve")
					waitLockedBy(t, head, l.SecondSSHUser)
				},
				Config: ours("a2"),
				ExpectError: regexp.MustCompile(`holds the lock on this node:\s+process\s+\d+\s+of\s+user\s+` + l.SecondSSHUser +
					`\s+\(uid\s+\d+\),\s+which\s+says:\s+terraform-provider-spark\s+pid\s+\d+`),
			},
			{
				// Theirs finishes; then ours applies, in turn.
				PreConfig: func() {
					if out, err := theirApply(); err != nil {
						t.Fatalf("second state: the apply that held the lock failed: %v\n%s", err, out)
					}
					before = snapshot(theirsLook)
				},
				Config: ours("a2"),
				Check:  untouched(theirsLook, 8001, theirToken),
			},
			{
				// Their destroy leaves ours: same processes, serving, token.
				PreConfig: func() {
					before = snapshot(oursLook)
					theirs.must("destroy", "-auto-approve")
					for _, n := range l.Nodes {
						if out := acctest.RunningOrFail(t, n, theirsLook); out != "" {
							t.Fatalf("the second state's destroy left its cluster on %s:\n%s", n.Name, out)
						}
						if out, err := lab.Exec(ctx, n, "docker", "ps", "-a", "-q", "--filter", "name=^ray-node-6380$"); err != nil || out != "" {
							t.Fatalf("the second state's destroy left its container on %s: %q %v", n.Name, out, err)
						}
					}
				},
				Config:           ours("a2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check:            untouched(oursLook, 8000, ourToken),
			},
			{
				// Theirs again, for our destroy to leave (CheckDestroy).
				PreConfig: func() {
					theirs.must("apply", "-auto-approve")
					before = snapshot(theirsLook)
				},
				Config:           ours("a2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

// waitLockedBy waits (bounded: 120 s) until user's provider holds the node
// lock on n: its note is there and the lock cannot be taken.
func waitLockedBy(t *testing.T, n lab.Node, user string) {
	t.Helper()
	script := `u=$(id -u "$1"); lock=/tmp/terraform-provider-spark.lock
for i in $(seq 240); do
  # Opened read-only, as LockScript does (no O_CREAT on another user's file).
  [ -s "$lock.holder.$u" ] && ! (exec 8<"$lock" && flock -n 8) && exit 0
  sleep 0.5
done
echo "user $1 never held the node lock" >&2; exit 1`
	acctest.OnNode(t, n, "wait for "+user+"'s apply to hold the node lock", script, user)
}
