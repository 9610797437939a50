package resources_test

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

// refusals turns steps that expect an error into plan-only steps — the
// refusal must come from `terraform plan`, not from apply — and checks,
// after each, on the nodes, that the plan started nothing: the same Ray
// daemons as before it and no new vllm serve. A plan-only step has no check
// of its own afterwards, so the check runs first thing in the next step's
// PreConfig: follow the refusals with then(step) or done().
type refusals struct {
	t      *testing.T
	l      *lab.File
	before string
	owed   bool
}

func newRefusals(t *testing.T, l *lab.File) *refusals { return &refusals{t: t, l: l} }

func (r *refusals) verify() {
	r.t.Helper()
	if !r.owed {
		return
	}
	r.owed = false
	if after := acctest.Snapshot(r.t, r.l, acctest.RayDaemons, acctest.VLLMServe); after != r.before {
		r.t.Fatalf("a plan that was refused started something on the nodes.\nbefore:\n%s\nafter:\n%s", r.before, after)
	}
}

// steps makes each step a plan-only refusal, checked on the nodes.
func (r *refusals) steps(steps ...resource.TestStep) []resource.TestStep {
	out := make([]resource.TestStep, 0, len(steps))
	for i, s := range steps {
		if s.ExpectError == nil {
			r.t.Fatalf("refusals: step %d expects no error", i)
		}
		s.PlanOnly = true
		orig := s.PreConfig
		s.PreConfig = func() {
			r.verify()
			if orig != nil {
				orig()
			}
			r.before, r.owed = acctest.Snapshot(r.t, r.l, acctest.RayDaemons, acctest.VLLMServe), true
		}
		out = append(out, s)
	}
	return out
}

// then makes s check first that the refusals before it started nothing.
func (r *refusals) then(s resource.TestStep) resource.TestStep {
	orig := s.PreConfig
	s.PreConfig = func() {
		r.verify()
		if orig != nil {
			orig()
		}
	}
	return s
}

// done is a last step for a test made only of refusals: it plans the empty
// configuration (nothing in state, so nothing to do) after the node check.
func (r *refusals) done() resource.TestStep {
	return r.then(resource.TestStep{Config: acctest.Provider{}.Config(r.l), PlanOnly: true})
}
