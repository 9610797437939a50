package resources_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// killRaylet kills a worker's raylet and waits (bounded) until the head's
// GCS has marked the node dead.
func killRaylet(t *testing.T, l *lab.File, n lab.Node) {
	t.Helper()
	ctx := context.Background()
	if _, err := lab.Exec(ctx, n, "pkill", "-9", "-x", "raylet"); err != nil {
		t.Fatalf("kill raylet on %s: %v", n.Name, err)
	}
	waitNodeDead(t, l, n)
}

// Mistakes the plan refuses before anything starts, each naming the values.
func TestAccRayCluster_planErrors(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	ctx := context.Background()
	r := newRefusals(t, l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: append(r.steps(
			resource.TestStep{
				// node_ip that is not on the head (the other node's fabric address).
				Config: rayCluster{headIP: w.FabricIP}.config(l),
				ExpectError: regexp.MustCompile(`(?s)node_ip is not an address of this node.*` + regexp.QuoteMeta(w.FabricIP) +
					`.*` + regexp.QuoteMeta(head.FabricIP)),
			},
			resource.TestStep{
				Config:      rayCluster{headIP: "127.0.0.1"}.config(l),
				ExpectError: regexp.MustCompile(`(?s)Invalid node_ip.*loopback address`),
			},
			resource.TestStep{
				Config:      rayCluster{headIP: "spark1.fabric"}.config(l),
				ExpectError: regexp.MustCompile(`(?s)is not an IP address.*hostname`),
			},
			resource.TestStep{
				// A worker cut off from the fabric reaches the head's fabric address only through a gateway.
				PreConfig: func() {
					if err := lab.Disconnect(ctx, w, lab.FabricNetwork); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = lab.Connect(context.Background(), w, lab.FabricNetwork) })
				},
				Config:      rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)Worker reaches the head only through a gateway.*` + regexp.QuoteMeta(head.FabricIP)),
			},
			resource.TestStep{
				PreConfig: func() {
					if err := lab.Connect(ctx, w, lab.FabricNetwork); err != nil {
						t.Fatal(err)
					}
					skewRayVersion(t, l, w)
				},
				Config: rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}, rayCommand: "/opt/skew/bin/ray"}.config(l),
				ExpectError: regexp.MustCompile(`(?s)Ray versions differ across nodes.*2\.0\.0 on ` + w.Name + `.*` +
					regexp.QuoteMeta(l.RayVersion) + ` on head`),
			},
			resource.TestStep{
				Config:      rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}, extra: []string{fmt.Sprintf(`env = { VLLM_HOST_IP = %q }`, head.FabricIP)}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)VLLM_HOST_IP in env does not match.*` + w.Name + `\s+registers\s+` + regexp.QuoteMeta(w.FabricIP)),
			},
			resource.TestStep{
				Config:      rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}, extra: []string{`env = { NCCL_SOCKET_IFNAME = "ib0" }`}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)Interface named in env does not exist.*"ib0"`),
			},
			resource.TestStep{
				// eth0 is the external interface: it exists but does not carry the fabric address Ray registers.
				Config:      rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: ""}, extra: []string{`env = { GLOO_SOCKET_IFNAME = "eth0" }`}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)does not carry the node's Ray address.*` + regexp.QuoteMeta(head.FabricIP)),
			},
			resource.TestStep{
				// The worker's own interface names its external port: it does not carry its fabric address.
				Config: rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: w.FabricIP},
					workerLines: []string{fmt.Sprintf("interface = %q", externalPort(t, w))}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)Interface does not carry the node's Ray address.*interface = "` + externalPort(t, w) + `".*` + w.Name +
					`.*not\s+` + regexp.QuoteMeta(w.FabricIP)),
			},
			resource.TestStep{
				// The head's own interface, and the same variable in env.
				Config: rayCluster{headIP: head.FabricIP, headLines: []string{fmt.Sprintf("interface = %q", fabricPort(t, head))},
					extra: []string{fmt.Sprintf("env = { GLOO_SOCKET_IFNAME = %q }", fabricPort(t, head))}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)Interface given twice.*head\.interface sets "` + fabricPort(t, head) + `".*Remove\s+GLOO_SOCKET_IFNAME\s+from\s+env`),
			},
		), r.done()),
	})
}

// externalPort and fabricPort are the node's ports by what they carry
// (their names change once a fault test has detached and reattached them).
func externalPort(t *testing.T, n lab.Node) string { return portOf(t, n, lab.ExternalInterface) }
func fabricPort(t *testing.T, n lab.Node) string   { return portOf(t, n, lab.FabricInterface) }

func portOf(t *testing.T, n lab.Node, find func(context.Context, lab.Node) (string, error)) string {
	t.Helper()
	name, err := find(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// skewRayVersion gives the worker a `ray` whose interpreter reports
// another Ray version, and the head one that reports the real one, both
// at /opt/skew/bin/ray (the plan only reads versions; nothing runs it).
func skewRayVersion(t *testing.T, l *lab.File, w lab.Node) {
	t.Helper()
	for _, n := range l.Nodes {
		script := "mkdir -p /opt/skew/bin && ln -sf " + n.RayCommand + " /opt/skew/bin/ray"
		if n.Name == w.Name {
			script = `set -e; rm -rf /opt/skew; python3 -m venv --without-pip /opt/skew
d=$(/opt/skew/bin/python -c 'import site; print(site.getsitepackages()[0])')/ray-2.0.0.dist-info
mkdir -p "$d"; printf 'Metadata-Version: 2.1\nName: ray\nVersion: 2.0.0\n' > "$d/METADATA"
printf '#!/opt/skew/bin/python\nprint("ray, version 2.0.0")\n' > /opt/skew/bin/ray; chmod +x /opt/skew/bin/ray`
		}
		acctest.OnNode(t, n, "skew Ray", script)
	}
	t.Cleanup(func() {
		for _, n := range l.Nodes {
			_, _ = lab.Exec(context.Background(), n, "rm", "-rf", "/opt/skew")
		}
	})
}

// Two ordinary users of the same nodes: while the second one's operation
// holds the node lock (the provider's own lock script, through its own SSH
// connection, as its apply would), the first one's apply fails fast naming
// the process and the user that hold it; once released, the first user
// applies on the lock file the second one created (it used to get
// "Permission denied" on another user's lock file).
func TestAccRayCluster_lockRefusesConcurrentApply(t *testing.T) {
	l := acctest.Lab(t)
	head := l.Nodes[0]
	pool, err := transport.NewPool(transport.Config{User: l.SecondSSHUser, PrivateKeyFile: l.PrivateKeyFile, KnownHostsFile: l.KnownHostsFile})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var held *transport.Held
	release := func() {
		if held != nil {
			held.Release()
			held = nil
		}
	}
	defer release()
	config := rayCluster{headIP: head.FabricIP}.config(l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{
				PreConfig: func() {
					// The lock file is the second user's from the start.
					if _, err := lab.Exec(context.Background(), head, "rm", "-f", "/tmp/terraform-provider-spark.lock"); err != nil {
						t.Fatal(err)
					}
					c, err := pool.Get(context.Background(), transport.Endpoint{Host: head.SSHHost})
					if err != nil {
						t.Fatal(err)
					}
					held, err = c.Hold(context.Background(), transport.Cmd{Step: "hold lock",
						Argv: transport.Script(raycluster.LockScript, "other apply (acceptance test)")}, "locked")
					if err != nil {
						t.Fatal(err)
					}
				},
				Config: config,
				ExpectError: regexp.MustCompile(`holds the lock on this node:\s+process\s+\d+\s+of\s+user\s+` + l.SecondSSHUser +
					`\s+\(uid\s+\d+\),\s+which\s+says:\s+other\s+apply\s+\(acceptance\s+test\)`),
			},
			{
				PreConfig: func() {
					release()
					out, err := lab.Exec(context.Background(), head, "stat", "-c", "%U", "/tmp/terraform-provider-spark.lock")
					if err != nil || strings.TrimSpace(out) != l.SecondSSHUser {
						t.Fatalf("the lock file is not the second user's: %q %v", out, err)
					}
				},
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterAddr, tfjsonpath.New("head").AtMapKey("alive"), knownvalue.Bool(true)),
				},
			},
		},
	})
}

// secret_env_wo reaches the Ray processes' environment on every node, and
// nowhere else: not state, not argv. A new version replaces the cluster
// with the new value. Terraform before 1.11 has no write-only attributes:
// there the attribute is refused, and nothing starts.
func TestAccRayCluster_secretEnvNeverInState(t *testing.T) {
	l := acctest.Lab(t)
	w := l.Nodes[1]
	canary := "canary-secret-" + fmt.Sprint(time.Now().UnixNano())
	t.Setenv("TF_VAR_ray_secret", canary)
	config := func(version int) string {
		return "variable \"ray_secret\" {\n  type      = string\n  sensitive = true\n}\n" + rayCluster{workers: map[string]string{w.Name: ""},
			extra: []string{"secret_env_wo = { SPARK_RAY_SECRET = var.ray_secret }", fmt.Sprintf("secret_env_wo_version = %d", version)}}.config(l)
	}
	if !openTofu() {
		r := newRefusals(t, l)
		resource.Test(t, resource.TestCase{
			PreCheck:                 func() { acctest.PreCheck(t) },
			ProtoV6ProviderFactories: acctest.Factories,
			CheckDestroy:             noRayLeft(l),
			Steps: append(r.steps(resource.TestStep{
				Config:      config(1),
				ExpectError: regexp.MustCompile(`(?s)secret_env_wo.*Write-only attributes are only supported in Terraform 1\.11`),
			}), r.done()),
		})
		return
	}
	inRay := func(want string) func(*terraform.State) error {
		return func(s *terraform.State) error {
			if err := acctest.SecretInState(s, canary); err != nil {
				return err
			}
			for _, n := range l.Nodes {
				out, err := lab.Exec(context.Background(), n, "sh", "-c", `p=$(pgrep -x raylet) && tr '\0' '\n' < /proc/$p/environ | grep '^SPARK_RAY_SECRET='; for p in $(pgrep -f '[/]opt[/]ray'); do tr '\0' ' ' < /proc/$p/cmdline; echo; done | grep -c -- "$1"; true`, "sh", canary)
				if err != nil || !strings.HasPrefix(out, "SPARK_RAY_SECRET="+want+"\n") {
					return fmt.Errorf("raylet on %s does not have SPARK_RAY_SECRET=%s in its environment: %q %w", n.Name, want, out, err)
				}
				if !strings.HasSuffix(strings.TrimSpace(out), "\n0") {
					return fmt.Errorf("the secret is in a Ray process's argv on %s: %q", n.Name, out)
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{Config: config(1), Check: inRay(canary)},
			{
				PreConfig: func() { canary += "-2"; t.Setenv("TF_VAR_ray_secret", canary) },
				Config:    config(2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterAddr, plancheck.ResourceActionReplace),
				}},
				Check: func(s *terraform.State) error { return inRay(canary)(s) },
			},
		},
	})
}

// gcsReadersAgree checks, on the running cluster, that the node table a
// plan reads from the GCS's gRPC service (no Python on the node) is the one
// Ray's own Python client reads: every node, every placement group with
// where its GPUs are and who holds them, and Ray's version. runtime is
// what the cluster runs in (its container's name matters to both readers);
// held, when not "", is what the holder of some created placement group
// must name.
func gcsReadersAgree(l *lab.File, rt raycluster.Spec, held string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[clusterAddr]
		if !ok {
			return fmt.Errorf("no %s in state", clusterAddr)
		}
		addr := rs.Primary.Attributes["head_address"]
		m, rt, done, err := headReader(l, rt)
		if err != nil {
			return err
		}
		defer done()
		ctx := context.Background()
		viaGRPC, err := m.TableOverGRPC(ctx, rt, addr)
		if err != nil {
			return fmt.Errorf("the GCS's gRPC service: %w", err)
		}
		viaPython, err := m.TableWithPython(ctx, rt, addr)
		if err != nil {
			return fmt.Errorf("Ray's Python client: %w", err)
		}
		if !viaGRPC.GCSUp || len(viaGRPC.Nodes) < 2 {
			return fmt.Errorf("the gRPC reading found no running cluster at %s: %+v", addr, viaGRPC)
		}
		if d := cmp.Diff(sortedTable(viaPython), sortedTable(viaGRPC)); d != "" {
			return fmt.Errorf("the two readings of %s differ (-Python +gRPC):\n%s", addr, d)
		}
		if held != "" && !slices.ContainsFunc(viaGRPC.PlacementGroups, func(g ray.PlacementGroup) bool {
			return g.State == "CREATED" && g.GPUs > 0 && strings.Contains(g.Holder, held)
		}) {
			return fmt.Errorf("no created placement group held by %q: %+v", held, viaGRPC.PlacementGroups)
		}
		return nil
	}
}

// headReader is the provider's own reading of Ray's tables, as the lab's
// SSH user, on the lab's head: rt with its endpoint there, and a manager
// whose connections done closes.
func headReader(l *lab.File, rt raycluster.Spec) (*raycluster.Manager, raycluster.Spec, func(), error) {
	pool, err := transport.NewPool(transport.Config{User: l.SSHUser, PrivateKeyFile: l.PrivateKeyFile, KnownHostsFile: l.KnownHostsFile})
	if err != nil {
		return nil, rt, nil, err
	}
	rt.Head.Endpoint = transport.Endpoint{Host: l.Nodes[0].SSHHost, Port: l.Nodes[0].SSHPort}
	return raycluster.NewManager(pool), rt, pool.Close, nil
}

// sortedTable orders what neither reader promises an order for.
func sortedTable(t ray.Table) ray.Table {
	slices.SortFunc(t.Nodes, func(a, b ray.Node) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(t.PlacementGroups, func(a, b ray.PlacementGroup) int { return strings.Compare(a.ID, b.ID) })
	return t
}
