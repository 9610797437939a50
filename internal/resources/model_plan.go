package resources

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
)

// ModifyPlan plans, as named steps, the targets' paths, what each target
// lacks now (drift, repaired by the apply and named in a warning), and
// the manifest (read again when the source changed).
func (r *modelResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan modelModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...); resp.Diagnostics.HasError() {
		return
	}
	var state *modelModel
	if !req.State.Raw.IsNull() {
		state = &modelModel{}
		if resp.Diagnostics.Append(req.State.Get(ctx, state)...); resp.Diagnostics.HasError() {
			return
		}
	}
	planModelID(&plan)
	planTargetPaths(&plan)
	changed := planModelFiles(ctx, &plan, state)
	planTargets(ctx, &plan, state, changed, &resp.Diagnostics)
	if r.checkReach(ctx, &plan, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	if r.recordPlanned(ctx, &plan, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// checkReach runs the target rules on every target, on every plan (a
// target that lacks nothing now still has its address and directory in
// state for the next repair): the target must hold its address and the
// source reach it (D22), and its directory must be the SSH user's alone
// (D23).
// Skipped while a node or address is unknown; the apply checks it then.
func (r *modelResource) checkReach(ctx context.Context, m *modelModel, diags *diag.Diagnostics) {
	if r.data == nil || m.Source == nil || m.Source.SSHHost.IsUnknown() || len(m.Targets) == 0 {
		return
	}
	for _, t := range m.Targets {
		if t.SSHHost.IsUnknown() || t.Address.IsUnknown() {
			return
		}
	}
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	targets := m.targetNodes()
	reach, err := r.manager(m).ReadReach(ctx, m.sourceNode(), targets)
	if err != nil {
		var found diag.Diagnostics
		modelError(&found, "Cannot read the model's nodes", err)
		diags.Append(withDestroyHint(found)...)
		return
	}
	var found []finding.Finding
	for _, t := range targets {
		mt := preflight.ModelTarget{Name: t.Name, SSHHost: t.Endpoint.Host, Address: t.Address, Facts: reach.Targets[t.Name],
			SourceHost: m.Source.SSHHost.ValueString(), SourceRoute: reach.SourceRoute[t.Name], Path: t.Path, Untrusted: reach.Untrusted[t.Name]}
		found = append(found, preflight.ModelTargetAddress(mt)...)
		found = append(found, preflight.ModelTargetDir(mt)...)
	}
	diags.Append(withDestroyHint(preflightDiags(found))...)
}

// recordPlanned tells the deployments planned after this model (they name
// it, so Terraform plans them after it) which directories hold which files
// once the apply ran: the source's and each target's. A model whose
// manifest is read at apply is listed at its source now, by names and
// sizes; a source directory missing or empty is refused here, before
// anything is copied.
func (r *modelResource) recordPlanned(ctx context.Context, plan *modelModel, diags *diag.Diagnostics) {
	if r.data == nil || plan.Source == nil || plan.Source.SSHHost.IsUnknown() || plan.Source.Path.IsUnknown() {
		return
	}
	files := map[string]int64{}
	man, d := plan.manifest(ctx)
	if plan.Files.IsUnknown() {
		ctx, cancel := providerdata.WithReadDeadline(ctx)
		defer cancel()
		var missing bool
		var err error
		man, missing, err = r.manager(plan).Read(ctx, plan.sourceNode(), false)
		switch {
		case err != nil:
			var found diag.Diagnostics
			modelError(&found, "Cannot read the model's source", err)
			diags.Append(withDestroyHint(found)...)
			return
		case missing || len(man) == 0:
			r.sourceEmpty(plan, diags)
			return
		}
	} else if diags.Append(d...); diags.HasError() {
		return
	}
	for p, f := range man {
		files[p] = f.Size
	}
	planned := r.data.Memo
	planned.PutModel(plan.Source.SSHHost.ValueString(), plan.Source.Path.ValueString(), files)
	for _, t := range plan.Targets {
		if !t.SSHHost.IsUnknown() && !t.Path.IsUnknown() {
			planned.PutModel(t.SSHHost.ValueString(), t.Path.ValueString(), files)
		}
	}
}

// planModelID: the model is known by its source, "<ssh_host>:<path>".
func planModelID(plan *modelModel) {
	if plan.Source != nil && !plan.Source.SSHHost.IsUnknown() && !plan.Source.Path.IsUnknown() {
		plan.ID = types.StringValue(plan.Source.SSHHost.ValueString() + ":" + plan.Source.Path.ValueString())
	} else {
		plan.ID = types.StringUnknown()
	}
}

// planTargetPaths: a target without a path gets the source's.
func planTargetPaths(plan *modelModel) {
	for _, t := range plan.Targets {
		if (t.Path.IsNull() || t.Path.IsUnknown()) && plan.Source != nil {
			t.Path = plan.Source.Path
		}
	}
}

// planModelFiles plans the manifest: the state's, unless there is none yet
// or the source changed since (then it is read at apply). It says whether
// the files change.
func planModelFiles(ctx context.Context, plan, state *modelModel) bool {
	if state == nil || state.Files.IsNull() {
		plan.Files, plan.TotalBytes = types.MapUnknown(fileType), types.Int64Unknown()
		return true
	}
	man, _ := state.manifest(ctx)
	if sourceChanged(man) {
		plan.Files, plan.TotalBytes = types.MapUnknown(fileType), types.Int64Unknown()
		return true
	}
	plan.Files, plan.TotalBytes = state.Files, state.TotalBytes
	return false
}

// planTargets plans each target as holding every file after the apply
// (missing empty), warns of each that lacks files now, naming them, and
// plans copied unknown where the apply will copy.
func planTargets(ctx context.Context, plan, state *modelModel, filesChange bool, diags *diag.Diagnostics) {
	for name, t := range plan.Targets {
		t.Missing = stringList(nil)
		var old *modelTarget
		if state != nil {
			old = state.Targets[name]
		}
		if old == nil || filesChange || !sameTarget(old, t) {
			t.Copied = types.ListUnknown(types.StringType)
			continue
		}
		t.Copied = old.Copied
		if lacks := listOf(ctx, old.Missing); len(lacks) > 0 {
			t.Copied = types.ListUnknown(types.StringType)
			diags.AddAttributeWarning(path.Root("targets").AtMapKey(name), "Model files missing on "+name,
				fmt.Sprintf("%s (%s) lacks %d file(s) of the model in %s, or holds them with another size or hash: %s. The apply copies them again from the source.",
					name, t.SSHHost.ValueString(), len(lacks), t.Path.ValueString(), strings.Join(lacks, ", ")))
		}
	}
}

// sameTarget: the target is reached, and holds the model, where it did.
func sameTarget(a, b *modelTarget) bool {
	return a.SSHHost.Equal(b.SSHHost) && a.SSHPort.Equal(b.SSHPort) && a.SSHUser.Equal(b.SSHUser) && a.Path.Equal(b.Path)
}
