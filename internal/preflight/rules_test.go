package preflight

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's table "What the plan refuses" is the catalogue as users read
// it: the same codes, in the same order, with the same wording as Rules.
func TestReadmeTableIsTheCatalogue(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`^\| (D\d+) \| (.+?) \| .+ \|$`)
	var got [][2]string
	for _, line := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			got = append(got, [2]string{m[1], m[2]})
		}
	}
	if len(got) != len(Rules) {
		t.Fatalf("README lists %d rules, the code %d", len(got), len(Rules))
	}
	for i, r := range Rules {
		if got[i][0] != string(r.Rule) || got[i][1] != r.What {
			t.Errorf("README row %d is %s %q; the code has %s %q", i+1, got[i][0], got[i][1], r.Rule, r.What)
		}
	}
}

// Every rule of the catalogue is enforced somewhere: its code is used by
// code outside rules.go (a diagnostic or a validator carrying it), and no
// code is used that the catalogue does not define.
func TestEveryRuleIsEnforced(t *testing.T) {
	defined := map[string]bool{}
	for _, r := range Rules {
		defined[string(r.Rule)] = true
	}
	used := map[string]bool{}
	code := regexp.MustCompile(`^D\d+$`)
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Base(path) == "rules.go" {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr: // preflight.D4 elsewhere
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "preflight" && code.MatchString(n.Sel.Name) {
					used[n.Sel.Name] = true
				}
			case *ast.Ident: // D4 inside this package
				if f.Name.Name == "preflight" && code.MatchString(n.Name) {
					used[n.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for c := range defined {
		if !used[c] {
			t.Errorf("rule %s is in the catalogue but no check carries it", c)
		}
	}
	for c := range used {
		if !defined[c] {
			t.Errorf("rule %s is used but not in the catalogue", c)
		}
	}
}
