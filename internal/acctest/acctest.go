// Package acctest is what acceptance tests share: the provider factories,
// the CLI checks, access to the lab (.lab/lab.json), and the helpers that
// look at and act on the lab's nodes.
//
// One helper per job. A test that needs one of these jobs calls its helper
// here, never a copy of its own, so that how the job is done is fixed in
// one place for every test:
//
//   - what runs on a node (Ray's daemons, vllm serve, a port held): Running
//     and RunningAs for checks that return an error, RunningOrFail in a
//     PreConfig, Snapshot for every node at once, PIDs to compare pids;
//     the Looks name what to look for;
//   - a shell script on a node that must succeed: OnNode, OnNodeAs;
//   - a secret that must never reach the state: SecretInState.
//
// A job a second test needs gets its helper here, not a second copy.
//
// Configurations are written one way. Each resource or data source a test
// configures has one builder: a small struct of options whose config method
// renders its block, the lab's values standing in for the zero fields
// (Provider here; rayCluster and deploy in internal/resources, nodeData in
// internal/datasources). A variant sets fields; when none fits, the builder
// gets a field: rendered HCL is not edited with strings.Replace. Blocks of
// different resources are joined by concatenation.
package acctest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/lab-infra/terraform-provider-spark/internal/lab"
	"github.com/lab-infra/terraform-provider-spark/internal/provider"
)

// Factories runs the provider in-process for terraform-plugin-testing.
var Factories = map[string]func() (tfprotov6.ProviderServer, error){
	"spark": providerserver.NewProtocol6WithError(provider.New("test")()),
}

// RepoRoot is the module root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// PreCheck fails (never skips) an acceptance test whose prerequisites are
// missing, with the command that provides them.
func PreCheck(t *testing.T) {
	t.Helper()
	p := os.Getenv("TF_ACC_TERRAFORM_PATH")
	if p == "" || !filepath.IsAbs(p) {
		t.Fatalf("TF_ACC_TERRAFORM_PATH = %q: set it to the absolute path of a terraform or tofu binary (`make tools` builds both into .tools/bin)", p)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("TF_ACC_TERRAFORM_PATH: %v (run `make tools`)", err)
	}
	// Machines of this kind export TF_CLI_CONFIG_FILE pointing at a file that
	// does not exist, which the CLI refuses: give it an empty one.
	if f := os.Getenv("TF_CLI_CONFIG_FILE"); f != "" {
		if _, err := os.Stat(f); err != nil {
			empty := filepath.Join(t.TempDir(), "terraformrc")
			if err := os.WriteFile(empty, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("TF_CLI_CONFIG_FILE", empty)
		}
	}
}

// Lab loads the lab file (LAB_FILE, else .lab/lab.json at the repo root).
// Without TF_ACC it skips the test before anything touches a node, as
// resource.Test itself would: `make test` needs no lab and changes none.
func Lab(t *testing.T) *lab.File {
	t.Helper()
	if os.Getenv("TF_ACC") == "" {
		t.Skip("acceptance test: runs with TF_ACC=1 on the lab (make testacc)")
	}
	path := os.Getenv("LAB_FILE")
	if path == "" {
		path = lab.FilePath(filepath.Join(RepoRoot(), ".lab"))
	}
	f, err := lab.Load(path)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if os.Getenv(RayReleaseEnv) == "second" { // make testacc-ray-next
		if f.SecondRay.RayCommand == "" {
			t.Fatalf("%s=second, but %s names no second Ray release: bring the lab up again (make lab-up)", RayReleaseEnv, path)
		}
		return f.OnSecondRay()
	}
	return f
}

// RayReleaseEnv, set to "second", runs the acceptance tests on the lab's
// second Ray release (lab.File.OnSecondRay): the Ray-reading tests run on
// both (make testacc-ray-next, RAY_NEXT_TESTS).
const RayReleaseEnv = "SPARK_LAB_RAY"

// LabDir is the directory holding the lab file.
func LabDir() string {
	if p := os.Getenv("LAB_FILE"); p != "" {
		return filepath.Dir(p)
	}
	return filepath.Join(RepoRoot(), ".lab")
}
