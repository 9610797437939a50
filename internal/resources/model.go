package resources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/modelcopy"
	"github.com/lab-infra/terraform-provider-spark/internal/modelfiles"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
)

// NewModel is the spark_model resource: a model's files, from a directory
// on one node, on every target node, copied node to node.
func NewModel() resource.Resource { return &modelResource{} }

type modelResource struct {
	data *providerdata.Data
}

func (r *modelResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_model"
}

// ConfigValidators: the model comes from a directory or from the Hub.
func (r *modelResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{resourcevalidator.ExactlyOneOf(
		path.MatchRoot("source").AtName("path"), path.MatchRoot("source").AtName("repository"))}
}

func (r *modelResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	data, diags := providerdata.From(req.ProviderData)
	resp.Diagnostics.Append(diags...)
	r.data = data
}

func (r *modelResource) manager(m *modelModel) *modelcopy.Manager {
	return &modelcopy.Manager{Pool: r.data.Pool, Python: m.PythonCommand.ValueString()}
}

func (r *modelResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m modelModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := m.Timeouts.Create(ctx, 6*time.Hour)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	mgr := r.manager(&m)
	if r.checkReach(ctx, &m, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	if r.fetch(ctx, mgr, req.Config, &m, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	man, ok := r.readSource(ctx, mgr, &m, &resp.Diagnostics)
	if !ok {
		return
	}
	m.setManifest(man)
	copied, err := mgr.Place(ctx, m.sourceNode(), man, m.targetNodes())
	if err != nil {
		// Nothing is recorded: what arrived stays in place, verified, and
		// the next apply copies only the rest.
		modelError(&resp.Diagnostics, "Cannot copy the model", err)
		return
	}
	for name, t := range m.Targets {
		t.Missing, t.Copied = stringList(nil), stringList(copied[name])
	}
	m.Source.TokenWO = types.StringNull() // write-only: never in state
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// fetch, for a source that names a Hugging Face repository, has the Hub's
// client on the source node put its snapshot in the node's cache, and
// plans the model from there: source.path is the snapshot's directory,
// source.commit what the revision resolved to, and every target's path
// left to the source's is that directory too.
func (r *modelResource) fetch(ctx context.Context, mgr *modelcopy.Manager, cfg tfsdk.Config, m *modelModel, diags *diag.Diagnostics) {
	if m.Source.Repository.IsNull() {
		m.Source.Commit = types.StringNull()
		return
	}
	var token types.String
	diags.Append(cfg.GetAttribute(ctx, path.Root("source").AtName("token_wo"), &token)...)
	dir, commit, err := mgr.Fetch(ctx, m.sourceNode(), modelfiles.FetchJob{Repository: m.Source.Repository.ValueString(),
		Revision: m.Source.Revision.ValueString(), Cache: m.Source.HubCache.ValueString(), Offline: m.Source.Offline.ValueBool(),
		Token: token.ValueString()})
	if err != nil {
		diags.AddAttributeError(path.Root("source").AtName("repository"), "Cannot fetch the model from the Hugging Face Hub",
			err.Error()+"\n\nThe source node fetches it with the Hub's client of python_command: it must reach the Hub (or, with "+
				"offline = true, hold the snapshot in its cache already), and a gated or private repository needs token_wo.")
		return
	}
	for _, t := range m.Targets {
		if t.Path.Equal(m.Source.Path) || t.Path.IsUnknown() {
			t.Path = types.StringValue(dir)
		}
	}
	m.Source.Path, m.Source.Commit = types.StringValue(dir), types.StringValue(commit)
	m.ID = types.StringValue(m.Source.SSHHost.ValueString() + ":" + dir)
}

// readSource hashes the source directory: the manifest every copy is
// checked against. A missing or empty directory is an error on
// source.path.
func (r *modelResource) readSource(ctx context.Context, mgr *modelcopy.Manager, m *modelModel, diags *diag.Diagnostics) (modelfiles.Manifest, bool) {
	man, missing, err := mgr.Read(ctx, m.sourceNode(), true)
	switch {
	case err != nil:
		modelError(diags, "Cannot read the model's source", err)
		return nil, false
	case missing || len(man) == 0:
		r.sourceEmpty(m, diags)
		return nil, false
	}
	if bad := modelfiles.Corrupt(man); len(bad) > 0 {
		diags.AddAttributeError(path.Root("source"), "The model's files differ from what the Hub published",
			fmt.Sprintf("On %s (%s), %s: %s hash to another SHA-256 than the Hub gave them (the name of their blob in the cache): "+
				"an interrupted or damaged download. Remove those blobs from the cache and fetch again; nothing was copied.",
				"source", m.Source.SSHHost.ValueString(), m.Source.Path.ValueString(), strings.Join(bad, ", ")))
		return nil, false
	}
	return man, true
}

// sourceEmpty is the error of a source directory that holds nothing.
func (r *modelResource) sourceEmpty(m *modelModel, diags *diag.Diagnostics) {
	diags.AddAttributeError(path.Root("source").AtName("path"), "The model's source directory is missing or empty",
		fmt.Sprintf("source.path = %q on %s holds no files. Give the directory that holds the model (its config.json and weights), "+
			"or a Hugging Face cache snapshot (…/hub/models--<org>--<name>/snapshots/<commit>).", m.Source.Path.ValueString(), m.Source.SSHHost.ValueString()))
}

func (r *modelResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	ctx, cancel := providerdata.WithReadDeadline(ctx)
	defer cancel()
	var m modelModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	mgr := r.manager(&m)
	if m.Files.IsNull() { // import: the manifest is read once, hashed at the source
		man, ok := r.readSource(ctx, mgr, &m, &resp.Diagnostics)
		if !ok {
			return
		}
		m.setManifest(man)
	} else if !r.readSourceDrift(ctx, mgr, &m, &resp.Diagnostics) {
		return
	}
	man, diags := m.manifest(ctx)
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	drift, err := mgr.Drift(ctx, man, m.targetNodes(), m.Verify.ValueString() == "sha256")
	if err != nil {
		modelError(&resp.Diagnostics, "Cannot read the model's targets", err)
		resp.Diagnostics = withGoneHint(resp.Diagnostics)
		return
	}
	for name, t := range m.Targets {
		t.Missing = stringList(drift[name])
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// readSourceDrift lists the source by names and sizes: a file changed,
// added or removed there since the manifest was made is written into the
// state's files without its hash, so the plan hashes the source again and
// copies what changed.
func (r *modelResource) readSourceDrift(ctx context.Context, mgr *modelcopy.Manager, m *modelModel, diags *diag.Diagnostics) bool {
	man, d := m.manifest(ctx)
	if diags.Append(d...); diags.HasError() {
		return false
	}
	now, missing, err := mgr.Read(ctx, m.sourceNode(), false)
	if err != nil {
		modelError(diags, "Cannot read the model's source", err)
		*diags = withGoneHint(*diags)
		return false
	}
	if missing {
		diags.AddAttributeWarning(path.Root("source").AtName("path"), "The model's source directory is gone",
			fmt.Sprintf("%s is gone from %s; the copies on the targets are kept. A change that copies again needs the source back.",
				m.Source.Path.ValueString(), m.Source.SSHHost.ValueString()))
		return true
	}
	if len(modelfiles.Missing(man, now)) == 0 && len(modelfiles.Missing(now, man)) == 0 {
		return true
	}
	m.setManifest(now) // sizes only: the hashes are read again at apply
	return true
}

// sourceChanged: the state's manifest was rewritten from a listing (no
// hashes), so the source changed since the copy.
func sourceChanged(man modelfiles.Manifest) bool {
	for _, f := range man {
		if f.SHA256 == "" {
			return true
		}
	}
	return false
}

func (r *modelResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state modelModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, 6*time.Hour)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	mgr := r.manager(&plan)
	if r.checkReach(ctx, &plan, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	if r.removeOldCopies(ctx, mgr, &plan, &state, &resp.Diagnostics); resp.Diagnostics.HasError() {
		return
	}
	man, ok := r.planManifest(ctx, mgr, &plan, &resp.Diagnostics)
	if !ok {
		return
	}
	copied, err := mgr.Place(ctx, plan.sourceNode(), man, refreshedTargets(ctx, &plan, &state))
	for name, t := range plan.Targets {
		before := []string{}
		if old := state.Targets[name]; old != nil && sameTarget(old, t) {
			before = listOf(ctx, old.Copied)
		}
		t.Copied = stringList(union(before, copied[name]))
		t.Missing = stringList(nil)
	}
	if err != nil {
		modelError(&resp.Diagnostics, "Cannot copy the model", err)
		r.recordMissing(ctx, mgr, man, &plan)
	}
	plan.Source.TokenWO = types.StringNull() // write-only: never in state
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// refreshedTargets are plan's targets, each that holds the state's
// manifest where the state had it carrying what the refresh found it
// lacks: Place copies that, without hashing every byte on the target again
// (a model of 100 GB reads for minutes). New or moved targets, or a changed
// manifest, are hashed first.
func refreshedTargets(ctx context.Context, plan, state *modelModel) []modelcopy.Node {
	nodes := plan.targetNodes()
	if !plan.Files.Equal(state.Files) {
		return nodes
	}
	for i, n := range nodes {
		if old := state.Targets[n.Name]; old != nil && sameTarget(old, plan.Targets[n.Name]) && !old.Missing.IsNull() && !old.Missing.IsUnknown() {
			nodes[i].Lacks, nodes[i].LacksKnown = listOf(ctx, old.Missing), true
		}
	}
	return nodes
}

// planManifest is the manifest the plan has, or, when it is unknown (the
// source changed), the source's hashed again and written into plan.
func (r *modelResource) planManifest(ctx context.Context, mgr *modelcopy.Manager, plan *modelModel, diags *diag.Diagnostics) (modelfiles.Manifest, bool) {
	if !plan.Files.IsUnknown() {
		man, d := plan.manifest(ctx)
		diags.Append(d...)
		return man, !diags.HasError()
	}
	man, ok := r.readSource(ctx, mgr, plan, diags)
	if ok {
		plan.setManifest(man)
	}
	return man, ok
}

// recordMissing lists what each target lacks after a failed copy, so the
// state says what the next apply copies (what did arrive is recorded as
// copied, and a destroy removes it).
func (r *modelResource) recordMissing(ctx context.Context, mgr *modelcopy.Manager, man modelfiles.Manifest, m *modelModel) {
	drift, _ := mgr.Drift(ctx, man, m.targetNodes(), false)
	for name, t := range m.Targets {
		if lacks, ok := drift[name]; ok {
			t.Missing = stringList(lacks)
		} else {
			t.Missing = stringList(slices.Sorted(maps.Keys(man)))
		}
	}
}

// removeOldCopies removes, unless keep_on_destroy, what this resource
// copied to a target that is gone from the configuration, or that is now
// reached or placed elsewhere.
func (r *modelResource) removeOldCopies(ctx context.Context, mgr *modelcopy.Manager, plan, state *modelModel, diags *diag.Diagnostics) {
	if plan.KeepOnDestroy.ValueBool() {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(state.Targets)) {
		old := state.Targets[name]
		if now := plan.Targets[name]; now != nil && sameTarget(old, now) {
			continue
		}
		n := modelcopy.Node{Name: name, Endpoint: old.Endpoint(), Path: old.Path.ValueString()}
		if err := mgr.Remove(ctx, n, listOf(ctx, old.Copied)); err != nil {
			modelError(diags, "Cannot remove the model's old copy", err)
		}
	}
}

func union(a, b []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(append(append([]string{}, a...), b...))))
}

func (r *modelResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m modelModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	if m.KeepOnDestroy.ValueBool() {
		return
	}
	timeout, diags := m.Timeouts.Delete(ctx, 10*time.Minute)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	mgr := r.manager(&m)
	var errs []error
	for _, n := range m.targetNodes() {
		if err := mgr.Remove(ctx, n, listOf(ctx, m.Targets[n.Name].Copied)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		var d diag.Diagnostics
		modelError(&d, "Cannot remove the model's copies", errors.Join(errs...))
		resp.Diagnostics.Append(withGoneHint(d)...)
	}
}

// ImportState takes "<source ssh_host>:<source path>"; the manifest is read
// at the source, and the targets come from the configuration (a target
// that already holds the files gets nothing copied, and none of them is
// counted as this resource's copy).
func (r *modelResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	host, dir, err := parseModelImportID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID", err.Error())
		return
	}
	resp.Diagnostics.Append(setImported(ctx, &resp.State, []imported{{path.Root("id"), req.ID},
		{path.Root("source").AtName("ssh_host"), host}, {path.Root("source").AtName("path"), dir},
		{path.Root("python_command"), "python3"}, {path.Root("verify"), "size"}, {path.Root("keep_on_destroy"), false}})...)
}

// parseModelImportID splits "<ssh_host>:<absolute path>".
func parseModelImportID(id string) (host, dir string, err error) {
	host, dir, ok := strings.Cut(id, ":/")
	if !ok || host == "" {
		return "", "", fmt.Errorf("import ID %q: want <source ssh_host>:<source path>, e.g. \"10.1.230.180:/models/llama\"", id)
	}
	return host, "/" + dir, nil
}
