package resources_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
)

const modelAddr = "spark_model.tiny"

// model is a spark_model on the lab: the source directory on the first
// node, copied to the others over the fabric. The builder of its
// configuration in these tests.
type model struct {
	name     string // resource name; default "tiny"
	src, dst string // directories; dst "" is src's path on the targets
	address  string // every target's address; "" is its fabric IP
	verify   string // "" leaves it to its default
}

// config renders the model with the lab's provider block.
func (m model) config(l *lab.File) string { return acctest.Provider{}.Config(l) + m.block(l) }

// block renders the model alone, for a configuration that has the
// provider block already.
func (m model) block(l *lab.File) string {
	if m.name == "" {
		m.name = "tiny"
	}
	var targets []string
	for _, n := range l.Nodes[1:] {
		path := ""
		if m.dst != "" {
			path = fmt.Sprintf("\n      path     = %q", m.dst)
		}
		address := n.FabricIP
		if m.address != "" {
			address = m.address
		}
		targets = append(targets, fmt.Sprintf(`    %s = {
      ssh_host = %q
      address  = %q%s
    }`, n.Name, n.SSHHost, address, path))
	}
	verify := ""
	if m.verify != "" {
		verify = fmt.Sprintf("\n  verify = %q", m.verify)
	}
	return fmt.Sprintf(`
resource "spark_model" %q {%s
  source = {
    ssh_host = %q
    path     = %q
  }
  targets = {
%s
  }
}
`, m.name, verify, l.Nodes[0].SSHHost, m.src, strings.Join(targets, "\n"))
}

// sums is "sha256  path" of every file below dir on n, sorted, as the SSH
// user sees them ("" when dir is gone).
func sums(t *testing.T, l *lab.File, n lab.Node, dir string) string {
	t.Helper()
	return acctest.OnNodeAs(t, n, l.SSHUser, "hash the model's files",
		`[ -d "$1" ] || exit 0; cd "$1" && find -L . -type f ! -name '*.partial' -exec sha256sum {} + | sort -k 2`, dir)
}

// A model in a directory on one node lands on the other over the fabric,
// verified; a file deleted and another truncated on the target show as
// drift at plan (naming the target), and the apply copies them again; an
// import reads the manifest back from the source; destroy removes the
// copies and never touches the source.
func TestAccModel_directoryOverTheFabric(t *testing.T) {
	l := acctest.Lab(t)
	src, target := l.Nodes[0], l.Nodes[1]
	base := "/tmp/spark-acc-weights"
	m := model{src: base + "/src", dst: base + "/dst"}
	for _, n := range l.Nodes {
		acctest.OnNode(t, n, "clear the model's directories", `rm -rf -- "$1"`, base)
	}
	acctest.OnNodeAs(t, src, l.SSHUser, "make a model", `mkdir -p "$1/tokenizer" && cd "$1" &&
head -c 12582917 /dev/urandom > model.safetensors && echo '{"architectures": ["LlamaForCausalLM"]}' > config.json &&
printf 'hello\nworld\n' > tokenizer/vocab.txt`, m.src)
	want := sums(t, l, src, m.src)
	onTarget := func(s *terraform.State) error {
		if got := sums(t, l, target, m.dst); got != want {
			return fmt.Errorf("the target holds:\n%s\nthe source:\n%s", got, want)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(*terraform.State) error {
			if got := sums(t, l, target, m.dst); got != "" {
				return fmt.Errorf("the copies outlive the destroy:\n%s", got)
			}
			if got := sums(t, l, src, m.src); got != want {
				return fmt.Errorf("the destroy touched the source:\n%s", got)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: m.config(l),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(modelAddr, plancheck.ResourceActionCreate),
					plancheck.ExpectUnknownValue(modelAddr, tfjsonpath.New("files")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("id"), knownvalue.StringExact(src.SSHHost+":"+m.src)),
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("total_bytes"), knownvalue.Int64Exact(12582917+40+12)),
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("files").AtMapKey("tokenizer/vocab.txt").AtMapKey("size"), knownvalue.Int64Exact(12)),
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("targets").AtMapKey(target.Name).AtMapKey("missing"), knownvalue.ListExact(nil)),
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("targets").AtMapKey(target.Name).AtMapKey("copied"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("config.json"), knownvalue.StringExact("model.safetensors"), knownvalue.StringExact("tokenizer/vocab.txt")})),
				},
				Check: onTarget,
			},
			{
				// Drift on the target: the plan names it and what it lacks.
				PreConfig: func() {
					acctest.OnNodeAs(t, target, l.SSHUser, "damage the copy", `cd "$1" && rm model.safetensors && : > config.json`, m.dst)
				},
				Config:             m.config(l),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				Config: m.config(l),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(modelAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(modelAddr, tfjsonpath.New("targets").AtMapKey(target.Name).AtMapKey("missing"), knownvalue.ListExact(nil)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("targets").AtMapKey(target.Name).AtMapKey("missing"), knownvalue.ListExact(nil)),
				},
				Check: onTarget,
			},
			{
				Config: m.config(l),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
			{
				// Hashed refreshes: a byte changed in place, at the file's
				// size, is drift too, and the apply copies the file again.
				Config: model{src: m.src, dst: m.dst, verify: "sha256"}.config(l),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(modelAddr, plancheck.ResourceActionUpdate),
				}},
			},
			{
				PreConfig: func() {
					acctest.OnNodeAs(t, target, l.SSHUser, "change a byte in place",
						`printf 'J' | dd of="$1/tokenizer/vocab.txt" bs=1 count=1 conv=notrunc 2>/dev/null`, m.dst)
				},
				Config:             model{src: m.src, dst: m.dst, verify: "sha256"}.config(l),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				Config: model{src: m.src, dst: m.dst, verify: "sha256"}.config(l),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("targets").AtMapKey(target.Name).AtMapKey("missing"), knownvalue.ListExact(nil)),
				},
				Check: onTarget,
			},
			{
				ResourceName:      modelAddr,
				ImportState:       true,
				ImportStateId:     src.SSHHost + ":" + m.src,
				ImportStateVerify: true,
				// The targets come from the configuration, not from the source.
				ImportStateVerifyIgnore: []string{"targets", "timeouts", "verify"},
			},
		},
	})
}

// The plan refuses a target address that is not an IP, naming it, before
// anything runs (validate); and one that is an IP but not the target's
// (the source's own fabric address, a copy-paste slip), on a plan where
// nothing needs copying: the model is there already (D22), naming the
// target, the address and the target's addresses. Nothing listens
// afterwards on either node that did not before.
func TestAccModel_badAddressRefused(t *testing.T) {
	l := acctest.Lab(t)
	src, target := l.Nodes[0], l.Nodes[1]
	base := "/tmp/spark-acc-address"
	m := model{src: base + "/src", dst: base + "/dst"}
	for _, n := range l.Nodes {
		acctest.OnNode(t, n, "clear the model's directories", `rm -rf -- "$1"`, base)
	}
	acctest.OnNodeAs(t, src, l.SSHUser, "make a model", `mkdir -p "$1" && cd "$1" && head -c 4096 /dev/urandom > model.safetensors && echo '{}' > config.json`, m.src)
	wrong := model{src: m.src, dst: m.dst, address: src.FabricIP}
	var listening string
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(*terraform.State) error {
			if got := sums(t, l, target, m.dst); got != "" {
				return fmt.Errorf("the copies outlive the destroy:\n%s", got)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:      model{src: "/tmp/nowhere", address: "spark2.fabric"}.config(l),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid address.*spark2\.fabric`),
			},
			{Config: m.config(l)},
			{
				PreConfig: func() { listening = acctest.Snapshot(t, l, acctest.Listeners) },
				Config:    wrong.config(l),
				PlanOnly:  true,
				ExpectError: regexp.MustCompile(`(?s)The model's target address is not an address of the target.*` +
					`targets\["` + target.Name + `"\]\.address\s+=\s+"` + regexp.QuoteMeta(src.FabricIP) + `".*` + regexp.QuoteMeta(target.FabricIP) + `.*D22`),
			},
			{
				PreConfig: func() {
					if now := acctest.Snapshot(t, l, acctest.Listeners); now != listening {
						t.Fatalf("a refused plan left something listening.\nbefore:\n%s\nafter:\n%s", listening, now)
					}
				},
				Config: m.config(l),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
		},
	})
}

// The model copied by spark_model serves with tensor parallel 2, the
// worker loading its own copy: the cluster, the model and the deployment
// in one configuration, planned as one (the weights rule, D20, checks what
// the model's plan puts on the worker, which holds nothing yet).
func TestAccModel_servesTensorParallel(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	dir := "/tmp/spark-acc-served/tiny-llama"
	for _, n := range l.Nodes {
		acctest.OnNode(t, n, "clear the model's directories", `rm -rf -- /tmp/spark-acc-served`)
	}
	acctest.OnNodeAs(t, head, l.SSHUser, "copy the tiny model to a new place", `mkdir -p "$(dirname "$2")" && cp -rL "$1" "$2"`, head.ModelPath, dir)
	cfg := rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: w.FabricIP}}.config(l) +
		model{src: dir}.block(l) + deploy{tp: 2, hostIP: head.FabricIP, modelRef: modelAddr + ".source.path"}.config(l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(s *terraform.State) error {
			if err := noVLLMLeft(l)(s); err != nil {
				return err
			}
			if got := sums(t, l, w, dir); got != "" {
				return fmt.Errorf("the copy on %s outlives the destroy:\n%s", w.Name, got)
			}
			return nil
		},
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(modelAddr, plancheck.ResourceActionCreate),
				plancheck.ExpectResourceAction(deployAddr, plancheck.ResourceActionCreate),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("status"), knownvalue.StringExact("serving")),
				statecheck.ExpectKnownValue(deployAddr, tfjsonpath.New("model"), knownvalue.StringExact(dir)),
			},
			Check: resource.ComposeAggregateTestCheckFunc(
				func(*terraform.State) error {
					if got, want := sums(t, l, w, dir), sums(t, l, head, dir); got != want || want == "" {
						return fmt.Errorf("%s holds:\n%s\nthe head:\n%s", w.Name, got, want)
					}
					return nil
				},
				// A serving vLLM holds a placement group: both readers name it.
				gcsReadersAgree(l, raycluster.Spec{}, " serve "+dir),
			),
		}},
	})
}

// Co-tenants on the lab's nodes (issue 33), the second SSH user as the
// other tenant, each refused at plan with nothing copied:
//   - a link in the source directory, tokenizer.model, to the SSH user's own
//     0600 file outside the model (High 1): refused naming it; the file's
//     bytes reach no target;
//   - the target directory made world-writable by the second user, with a
//     link config.json.partial to the first user's file (High 2): refused
//     (D23) naming the directory and its owner; the first user's file keeps
//     its bytes.
//
// Then the same model into a directory of the user's own copies cleanly.
func TestAccModel_coTenantsRefusedAtPlan(t *testing.T) {
	l := acctest.Lab(t)
	src, target := l.Nodes[0], l.Nodes[1]
	base := "/tmp/spark-acc-cotenant"
	shared := "/tmp/spark-acc-shared-models"
	for _, n := range l.Nodes {
		acctest.OnNode(t, n, "clear the directories", `rm -rf -- "$1" "$2"`, base, shared)
	}
	t.Cleanup(func() {
		for _, n := range l.Nodes {
			_, _ = lab.Exec(context.Background(), n, "rm", "-rf", "--", base, shared)
		}
	})
	m := model{src: base + "/src", dst: base + "/dst"}
	acctest.OnNodeAs(t, src, l.SSHUser, "make a model and a secret beside it", `mkdir -p "$1" && cd "$1" && head -c 4096 /dev/urandom > model.safetensors && echo '{}' > config.json &&
umask 077 && echo 'SECRET OF THE SSH USER' > "$2" && ln -s "$2" tokenizer.model`, m.src, base+"/secret.txt")
	victim := acctest.OnNodeAs(t, target, l.SSHUser, "a file of the first user", `echo 'VICTIM BYTES' > "$HOME/victim.txt" && echo "$HOME/victim.txt"`)
	acctest.OnNodeAs(t, target, l.SecondSSHUser, "the second user plants a shared directory", `mkdir -p "$1/m" && chmod 777 "$1" "$1/m" && ln -s "$2" "$1/m/config.json.partial"`, shared, victim)
	noSecretAnywhere := func() {
		for _, n := range l.Nodes[1:] {
			if got := acctest.OnNode(t, n, "look for the secret", `grep -rl 'SECRET OF THE SSH USER' "$1" "$2" 2>/dev/null || true`, base, shared); got != "" {
				t.Fatalf("the secret reached %s: %s", n.Name, got)
			}
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(*terraform.State) error {
			if got := sums(t, l, target, m.dst); got != "" {
				return fmt.Errorf("the copies outlive the destroy:\n%s", got)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:      m.config(l),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Cannot read the model's source.*"tokenizer\.model":\s+a\s+link\s+to\s+` + regexp.QuoteMeta(base+"/secret.txt") + `,\s+outside\s+the\s+model`),
			},
			{
				PreConfig: func() {
					noSecretAnywhere()
					acctest.OnNodeAs(t, src, l.SSHUser, "remove the link", `rm -f "$1/tokenizer.model"`, m.src)
				},
				Config:      model{src: m.src, dst: shared + "/m"}.config(l),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)The model's target directory is not this SSH user's alone.*` + regexp.QuoteMeta(shared) + `.*` + l.SecondSSHUser + `.*D23`),
			},
			{
				PreConfig: func() {
					if got := acctest.OnNodeAs(t, target, l.SSHUser, "read the victim", `cat "$1"`, victim); got != "VICTIM BYTES" {
						t.Fatalf("the first user's file was written: %q", got)
					}
				},
				Config: m.config(l),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("targets").AtMapKey(target.Name).AtMapKey("copied"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("config.json"), knownvalue.StringExact("model.safetensors")})),
				},
			},
		},
	})
}
