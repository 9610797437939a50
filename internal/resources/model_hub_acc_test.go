package resources_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

// hubCache makes a Hugging Face cache on n holding repo "lab/tiny" at
// commit, as the Hub's client leaves it (refs/main, blobs named by their
// hash, a snapshot of links into blobs/); corrupt makes the weights' bytes
// differ from their blob's name. It returns the snapshot's directory.
// hubCacheDir is the Hugging Face cache the Hub tests make on the lab.
const hubCacheDir = "/tmp/spark-acc-hub"

func hubCache(t *testing.T, l *lab.File, n lab.Node, commit string, corrupt bool) string {
	t.Helper()
	damage := ""
	if corrupt {
		damage = `printf 'X' | dd of="$blobs/$w" bs=1 count=1 conv=notrunc 2>/dev/null`
	}
	acctest.OnNodeAs(t, n, l.SSHUser, "make a Hugging Face cache", `set -e
repo="$1/models--lab--tiny"; blobs="$repo/blobs"; snap="$repo/snapshots/$2"
rm -rf "$repo"; mkdir -p "$blobs" "$snap" "$repo/refs"
head -c 3145728 /dev/urandom > "$blobs/weights"; w=$(sha256sum "$blobs/weights" | cut -c1-64); mv "$blobs/weights" "$blobs/$w"
printf '{"architectures": ["LlamaForCausalLM"]}\n' > "$blobs/config"; c=$(sha1sum "$blobs/config" | cut -c1-40); mv "$blobs/config" "$blobs/$c"
ln -s "../../blobs/$w" "$snap/model.safetensors"; ln -s "../../blobs/$c" "$snap/config.json"
printf '%s' "$2" > "$repo/refs/main"
`+damage, hubCacheDir, commit)
	return hubCacheDir + "/models--lab--tiny/snapshots/" + commit
}

// hubModel is a spark_model fetching "lab/tiny" from the first node's
// cache (offline, as the lab cannot reach the Hub), to the second node.
func hubModel(l *lab.File, repo string) string {
	src, target := l.Nodes[0], l.Nodes[1]
	return acctest.Provider{}.Config(l) + fmt.Sprintf(`
resource "spark_model" "tiny" {
  python_command = %q
  source = {
    ssh_host   = %q
    repository = %q
    hub_cache  = %q
    offline    = true
  }
  targets = {
    %s = { ssh_host = %q, address = %q }
  }
}
`, src.PythonCommand, src.SSHHost, repo, hubCacheDir, target.Name, target.SSHHost, target.FabricIP)
}

// A Hugging Face repository fetched on the source node with the Hub's own
// client (offline, from the node's cache): its revision resolved to the
// commit, its snapshot copied to the other node (as files, at the same
// path), each LFS file checked against the hash the Hub named its blob by.
// A damaged blob is refused before anything is copied, naming the file;
// a repository the cache does not hold is refused naming it and the node.
func TestAccModel_huggingFaceCacheSnapshot(t *testing.T) {
	l := acctest.Lab(t)
	src, target := l.Nodes[0], l.Nodes[1]
	const commit = "0123456789abcdef0123456789abcdef01234567"
	for _, n := range l.Nodes {
		acctest.OnNode(t, n, "clear the caches", `rm -rf -- "$1"`, hubCacheDir)
	}
	snap := hubCache(t, l, src, commit, false)
	want := sums(t, l, src, snap)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy: func(*terraform.State) error {
			if got := sums(t, l, target, snap); got != "" {
				return fmt.Errorf("the copies outlive the destroy:\n%s", got)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config:      hubModel(l, "lab/absent"),
				ExpectError: regexp.MustCompile(`(?s)Cannot\s+fetch\s+the\s+model\s+from\s+the\s+Hugging\s+Face\s+Hub.*source.*lab/absent`),
			},
			{
				PreConfig:   func() { hubCache(t, l, src, commit, true) },
				Config:      hubModel(l, "lab/tiny"),
				ExpectError: regexp.MustCompile(`(?s)differ\s+from\s+what\s+the\s+Hub\s+published.*model\.safetensors\s+hash\s+to\s+another`),
			},
			{
				PreConfig: func() {
					if got := sums(t, l, target, snap); got != "" {
						t.Fatalf("a refused fetch copied:\n%s", got)
					}
					hubCache(t, l, src, commit, false)
					want = sums(t, l, src, snap)
				},
				Config: hubModel(l, "lab/tiny"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("source").AtMapKey("commit"), knownvalue.StringExact(commit)),
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("source").AtMapKey("path"), knownvalue.StringExact(snap)),
					statecheck.ExpectKnownValue(modelAddr, tfjsonpath.New("targets").AtMapKey(target.Name).AtMapKey("path"), knownvalue.StringExact(snap)),
				},
				Check: func(*terraform.State) error {
					if got := sums(t, l, target, snap); got != want {
						return fmt.Errorf("%s holds:\n%s\nthe snapshot:\n%s", target.Name, got, want)
					}
					if links := acctest.OnNodeAs(t, target, l.SSHUser, "look for links", `find "$1" -type l`, snap); links != "" {
						return fmt.Errorf("the copy holds links into a cache the target does not have: %s", links)
					}
					return nil
				},
			},
			{
				Config:           hubModel(l, "lab/tiny"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}
