package resources

import (
	"errors"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/modelcopy"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Terraform's `destroy` first refreshes with a normal plan (its own source,
// internal/terraform/context_plan.go, destroyPlan: "A normal plan is required
// here to refresh the state", PreDestroyRefresh), and nothing in the
// provider protocol says a plan is that one. So a check that fails at plan
// would also block `destroy`. Two ways through:
//   - a check that only guards starting something is a warning when the
//     plan starts nothing (startGuardsAsWarnings): an unchanged resource never blocks;
//   - every error a plan or refresh still raises ends with destroyHint.

// guards picks the findings that are faults of what runs now (now true),
// or the checks that only guard a start (now false).
func guards(found []finding.Finding, now bool) []finding.Finding {
	var out []finding.Finding
	for _, d := range found {
		if d.Now == now {
			out = append(out, d)
		}
	}
	return out
}

// faultNow: an error reading the nodes that is a fault now, whatever the
// plan starts: a host key that changed, or a host certificate from a
// trusted CA that is not valid (strict or accept-new refuse both, as
// OpenSSH does; the plan must fail so a scheduled plan's exit code shows
// it, not pass with a warning).
func faultNow(err error) bool {
	var hk *transport.HostKeyError
	return errors.As(err, &hk) && (hk.Problem == transport.HostKeyChanged || hk.Problem == transport.HostKeyBadCert)
}

// destroyHint is the one line that says how to destroy anyway.
const destroyHint = "\n\nDestroying? This check runs in the refresh before a destroy too: " +
	"`terraform destroy -refresh=false` (or `tofu destroy -refresh=false`) skips it."

// goneHint is the way out when a node is unreachable for good.
const goneHint = "\n\nIf the node is gone for good, `terraform state rm <address>` forgets this resource " +
	"without touching any node (Ray on the nodes that remain stops when its head does)."

// withDestroyHint returns diags with destroyHint appended to every
// error's detail.
func withDestroyHint(diags diag.Diagnostics) diag.Diagnostics {
	return rewriteErrors(diags, diag.SeverityError, func(detail string) string { return detail + destroyHint })
}

// startGuardsAsWarnings turns the errors of checks that guard a start into warnings,
// for a plan that starts nothing: what runs keeps running, and the finding
// is shown for the next start.
func startGuardsAsWarnings(diags diag.Diagnostics) diag.Diagnostics {
	const why = "Nothing is started or restarted by this plan, so this is not an error now; " +
		"a plan that starts or restarts it will refuse it until it is fixed.\n\n"
	return rewriteErrors(diags, diag.SeverityWarning, func(detail string) string { return why + detail })
}

// rewriteErrors gives every error of diags the severity to and a new
// detail, keeping its summary and attribute path; other diagnostics pass.
func rewriteErrors(diags diag.Diagnostics, to diag.Severity, detail func(string) string) diag.Diagnostics {
	out := make(diag.Diagnostics, 0, len(diags))
	for _, d := range diags {
		if d.Severity() != diag.SeverityError {
			out = append(out, d)
			continue
		}
		n := newDiagnostic(to, d.Summary(), detail(d.Detail()))
		if dp, ok := d.(diag.DiagnosticWithPath); ok {
			n = diag.WithPath(dp.Path(), n)
		}
		out = append(out, n)
	}
	return out
}

func newDiagnostic(s diag.Severity, summary, detail string) diag.Diagnostic {
	if s == diag.SeverityWarning {
		return diag.NewWarningDiagnostic(summary, detail)
	}
	return diag.NewErrorDiagnostic(summary, detail)
}

// withGoneHint returns diags with goneHint appended to every error's
// detail: what fails a destroy, when a node may be gone for good.
func withGoneHint(diags diag.Diagnostics) diag.Diagnostics {
	return rewriteErrors(diags, diag.SeverityError, func(detail string) string { return detail + goneHint })
}

// modelError is a modelcopy failure as a diagnostic: on the target it
// names, or on the source.
func modelError(diags *diag.Diagnostics, summary string, err error) {
	var each []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		each = j.Unwrap()
	} else {
		each = []error{err}
	}
	for _, e := range each {
		var me *modelcopy.Error
		switch {
		case errors.As(e, &me) && me.Node == "source":
			diags.AddAttributeError(path.Root("source"), summary, e.Error())
		case errors.As(e, &me):
			diags.AddAttributeError(path.Root("targets").AtMapKey(me.Node), summary, e.Error())
		default:
			diags.AddError(summary, e.Error())
		}
	}
}

// attrPath is a finding's attribute path as the framework's.
func attrPath(steps finding.Path) path.Path {
	if len(steps) == 0 {
		return path.Empty()
	}
	p := path.Root(steps[0].Name)
	for _, s := range steps[1:] {
		if s.IsKey {
			p = p.AtMapKey(s.Key)
			continue
		}
		p = p.AtName(s.Name)
	}
	return p
}

// addPreflight adds what a domain package found to diags: the one way its
// results reach the user.
func addPreflight(diags *diag.Diagnostics, found []finding.Finding) {
	diags.Append(preflightDiags(found)...)
}

// preflightDiags is found as the framework's diagnostics: each on its
// attribute, its detail ending with the rule it enforces.
func preflightDiags(found []finding.Finding) diag.Diagnostics {
	var diags diag.Diagnostics
	for _, d := range found {
		p := attrPath(d.Path)
		d.Detail += d.Rule.Cite()
		switch {
		case d.Warning && len(d.Path) > 0:
			diags.AddAttributeWarning(p, d.Summary, d.Detail)
		case d.Warning:
			diags.AddWarning(d.Summary, d.Detail)
		case len(d.Path) > 0:
			diags.AddAttributeError(p, d.Summary, d.Detail)
		default:
			diags.AddError(d.Summary, d.Detail)
		}
	}
	return diags
}
