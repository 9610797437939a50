package acctest

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-testing/plancheck"
)

// ExpectAdoptedInPlace passes when the plan imports addr and at most updates
// it in place: an import must adopt what runs, never restart or replace it
// (settings the nodes cannot report back are taken from the configuration).
func ExpectAdoptedInPlace(addr string) plancheck.PlanCheck { return adoptedInPlace(addr) }

type adoptedInPlace string

func (a adoptedInPlace) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != string(a) {
			continue
		}
		switch {
		case rc.Change.Importing == nil:
			resp.Error = fmt.Errorf("%s: planned %v without importing it", a, rc.Change.Actions)
		case !rc.Change.Actions.NoOp() && !rc.Change.Actions.Update():
			resp.Error = fmt.Errorf("%s: the import plans %v; an import must adopt in place (no-op or update)", a, rc.Change.Actions)
		}
		return
	}
	resp.Error = fmt.Errorf("%s: not in the plan", a)
}
