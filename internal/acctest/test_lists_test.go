package acctest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTofuSubset keeps the OpenTofu run honest: every name in the
// GNUmakefile's TOFU_TESTS is an acceptance test that exists, so a rename
// cannot silently drop a test from the OpenTofu run.
func TestTofuSubset(t *testing.T) { checkTestList(t, "TOFU_TESTS", 5) }

// TestRayNextSubset does the same for the tests run on the lab's second Ray
// release (RAY_NEXT_TESTS).
func TestRayNextSubset(t *testing.T) { checkTestList(t, "RAY_NEXT_TESTS", 2) }

// TestNoServerSubset does the same for the tests test-all runs on its second
// lane (NO_SERVER_TESTS): a renamed one would still run, on the first lane
// (its -skip no longer names it), but the lanes' balance is measured on
// these names.
func TestNoServerSubset(t *testing.T) { checkTestList(t, "NO_SERVER_TESTS", 20) }

func checkTestList(t *testing.T, variable string, atLeast int) {
	root := RepoRoot()
	mk, err := os.ReadFile(filepath.Join(root, "GNUmakefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + variable + ` := (.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatalf("GNUmakefile has no %s line", variable)
	}
	names := strings.Split(strings.TrimSpace(string(m[1])), "|")
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (TestAcc\w+)\(t \*testing\.T\)`)
	err = filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range decl.FindAllSubmatch(src, -1) {
			defined[string(f[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < atLeast {
		t.Fatalf("%s names %d tests: %v", variable, len(names), names)
	}
	for _, n := range names {
		if !defined[n] {
			t.Errorf("%s names %s, which is no acceptance test in internal/", variable, n)
		}
	}
}
