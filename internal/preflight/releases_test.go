package preflight

import (
	"strings"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
)

// The releases the reader was checked on plan quietly; older ones are
// refused, newer ones warned of; no Ray or no version is D6's to say.
func TestRayRelease(t *testing.T) {
	p := finding.Attr("ray_address")
	for _, c := range []struct {
		version string
		want    string // "" nothing, "error", "warning"
	}{
		{"2.9.3", ""}, {"2.35.0", ""}, {"2.52.1", ""}, {"2.60.0", ""}, {"2.60.3", ""},
		{"2.9.2", "error"}, {"2.5.0", "error"}, {"1.13.1", "error"},
		{"2.61.0", "warning"}, {"3.0.0", "warning"}, {"2.61.0rc1", "warning"},
		{"", ""}, {"not a version", ""},
	} {
		got := RayRelease(c.version, "the head (spark1)", p)
		switch {
		case c.want == "" && len(got) != 0:
			t.Errorf("Ray %q: %+v, want nothing", c.version, got)
		case c.want != "" && (len(got) != 1 || got[0].Rule != D24 || got[0].Warning != (c.want == "warning") || got[0].Path.String() != "ray_address"):
			t.Errorf("Ray %q: %+v, want one D24 %s on ray_address", c.version, got, c.want)
		case c.want != "" && (!strings.Contains(got[0].Detail, c.version) || !strings.Contains(got[0].Detail, "2.9.3 to 2.60")):
			t.Errorf("Ray %q: the detail names neither the version nor the checked range: %s", c.version, got[0].Detail)
		}
	}
}
