package resources

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

func sample() diag.Diagnostics {
	var d diag.Diagnostics
	d.AddAttributeError(path.Root("host_ip"), "Placement pinned to an unregistered address", "detail A")
	d.AddError("Cannot read the nodes for this plan", "detail B")
	d.AddWarning("Ray dashboard exposed", "detail C")
	return d
}

func TestWithHintEndsEveryErrorWithTheWayOut(t *testing.T) {
	got := withDestroyHint(sample())
	if len(got) != 3 || got.ErrorsCount() != 2 || got.WarningsCount() != 1 {
		t.Fatalf("severities changed: %v", got)
	}
	for _, d := range got.Errors() {
		if !strings.HasSuffix(d.Detail(), destroyHint) || !strings.Contains(d.Detail(), "detail") {
			t.Errorf("%q: detail %q lacks the hint or its own text", d.Summary(), d.Detail())
		}
	}
	if p, ok := got.Errors()[0].(diag.DiagnosticWithPath); !ok || !p.Path().Equal(path.Root("host_ip")) {
		t.Errorf("the attribute path was lost: %v", got.Errors()[0])
	}
	if w := got.Warnings()[0]; strings.Contains(w.Detail(), "destroy") {
		t.Errorf("a warning got the hint: %q", w.Detail())
	}
}

func TestKeptRunningDemotesErrorsOnly(t *testing.T) {
	got := startGuardsAsWarnings(sample())
	if got.HasError() || got.WarningsCount() != 3 {
		t.Fatalf("want three warnings, got %v", got)
	}
	for i, want := range []string{"detail A", "detail B"} {
		if d := got[i].Detail(); !strings.Contains(d, "Nothing is started") || !strings.HasSuffix(d, want) {
			t.Errorf("%q: %q", got[i].Summary(), d)
		}
	}
	if p, ok := got[0].(diag.DiagnosticWithPath); !ok || !p.Path().Equal(path.Root("host_ip")) {
		t.Errorf("the attribute path was lost: %v", got[0])
	}
	if got[2].Detail() != "detail C" {
		t.Errorf("a warning was changed: %q", got[2].Detail())
	}
}

// Which read errors fail a plan that starts nothing: a refused host key or
// certificate does (a scheduled plan must see it in its exit code); an
// unknown key (accept-new learns it) and other read errors do not.
func TestFaultNowIsARefusedHostKey(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&transport.Error{Step: "handshake", ExitStatus: -1, Err: &transport.HostKeyError{Problem: transport.HostKeyChanged}}, true},
		{&transport.Error{Step: "handshake", ExitStatus: -1, Err: &transport.HostKeyError{Problem: transport.HostKeyBadCert}}, true},
		{&transport.Error{Step: "handshake", ExitStatus: -1, Err: &transport.HostKeyError{Problem: transport.HostKeyUnknown}}, false},
		{&transport.Error{Step: "connect", ExitStatus: -1, Err: errors.New("connection refused")}, false},
	} {
		if got := faultNow(c.err); got != c.want {
			t.Errorf("faultNow(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
