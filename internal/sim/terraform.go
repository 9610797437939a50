package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	sparkprovider "github.com/lab-infra/terraform-provider-spark/internal/provider"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// observed is the provider with a window on what its Configure built:
// the SSH pool, whose handshakes the bench counts. Everything else is the
// provider's own.
type observed struct {
	provider.Provider
	data *providerdata.Data
}

func (o *observed) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	o.Provider.Configure(ctx, req, resp)
	if d, ok := resp.ResourceData.(*providerdata.Data); ok {
		o.data = d
	}
}

// Terraform plays Terraform to one provider instance, through the
// provider's protocol 6 server, in this process: the calls a `terraform
// plan` or `apply` makes, in its order, with its values (msgpack-encoded,
// as on the wire; only gRPC itself is skipped). One Terraform is one
// provider process: Terraform starts the provider afresh for every command.
type Terraform struct {
	srv      tfprotov6.ProviderServer
	schemas  *tfprotov6.GetProviderSchemaResponse
	prov     *observed
	warnings []string
	all      []*tfprotov6.Diagnostic
}

// NewTerraform starts a provider instance and configures it as Terraform
// does before any resource call: schema, provider config validation, then
// ConfigureProvider (which builds the SSH pool; nothing connects yet).
func NewTerraform(ctx context.Context, providerConfig map[string]any) (*Terraform, error) {
	t := &Terraform{prov: &observed{Provider: sparkprovider.New("sim")()}}
	t.srv = providerserver.NewProtocol6(t.prov)()
	var err error
	if t.schemas, err = t.srv.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{}); err != nil {
		return nil, err
	}
	if err := t.diags("get provider schema", t.schemas.Diagnostics); err != nil {
		return nil, err
	}
	if err := t.configure(ctx, providerConfig); err != nil {
		return nil, err
	}
	if t.prov.data == nil {
		return nil, errors.New("the provider configured no SSH pool")
	}
	return t, nil
}

func (t *Terraform) configure(ctx context.Context, providerConfig map[string]any) error {
	cfg, err := dynamic(t.schemas.Provider.ValueType(), providerConfig)
	if err != nil {
		return fmt.Errorf("provider config: %w", err)
	}
	v, err := t.srv.ValidateProviderConfig(ctx, &tfprotov6.ValidateProviderConfigRequest{Config: cfg})
	if err != nil {
		return err
	}
	if err := t.diags("validate provider config", v.Diagnostics); err != nil {
		return err
	}
	c, err := t.srv.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{TerraformVersion: "1.8.5", Config: cfg})
	if err != nil {
		return err
	}
	return t.diags("configure provider", c.Diagnostics)
}

// Pool is the provider's SSH pool.
func (t *Terraform) Pool() *transport.Pool { return t.prov.data.Pool }

// Warnings are the warnings the provider reported so far.
func (t *Terraform) Warnings() []string { return append([]string(nil), t.warnings...) }

// Diagnostics are every diagnostic the provider reported so far, errors
// and warnings, in order, as Terraform would print them.
func (t *Terraform) Diagnostics() []*tfprotov6.Diagnostic {
	return append([]*tfprotov6.Diagnostic(nil), t.all...)
}

// Close closes the provider's connections, as its process ending would.
func (t *Terraform) Close() { t.Pool().Close() }

// StepError is a step the provider failed: every diagnostic of that step,
// the errors and the warnings beside them, as Terraform would print them.
type StepError struct {
	Step        string
	Diagnostics []*tfprotov6.Diagnostic
}

func (e *StepError) Error() string {
	var errs []string
	for _, d := range e.Diagnostics {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			errs = append(errs, d.Summary+": "+d.Detail)
		}
	}
	return fmt.Sprintf("%s: %s", e.Step, strings.Join(errs, "\n"))
}

// diags keeps warnings and turns errors into a *StepError naming the step.
func (t *Terraform) diags(step string, ds []*tfprotov6.Diagnostic) error {
	failed := false
	t.all = append(t.all, ds...)
	for _, d := range ds {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			failed = true
		} else {
			t.warnings = append(t.warnings, d.Summary+": "+d.Detail)
		}
	}
	if failed {
		return &StepError{Step: step, Diagnostics: ds}
	}
	return nil
}

func (t *Terraform) resourceType(name string) (tftypes.Type, *tfprotov6.Schema, error) {
	s, ok := t.schemas.ResourceSchemas[name]
	if !ok {
		return nil, nil, fmt.Errorf("no resource %s", name)
	}
	return s.ValueType(), s, nil
}

// dynamic is v (plain Go values) as a DynamicValue of type typ.
func dynamic(typ tftypes.Type, v any) (*tfprotov6.DynamicValue, error) {
	val, ok := v.(tftypes.Value)
	if !ok {
		var err error
		if val, err = valueOf(typ, v); err != nil {
			return nil, err
		}
	}
	dv, err := tfprotov6.NewDynamicValue(typ, val)
	return &dv, err
}

// State is one resource instance as Terraform keeps it between runs.
type State struct {
	Value   tftypes.Value
	Private []byte
}

// rawState is the state as the state file holds it (JSON).
func rawState(v tftypes.Value) (*tfprotov6.RawState, error) {
	j, err := jsonOf(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(j)
	return &tfprotov6.RawState{JSON: b}, err
}

// validate is ValidateResourceConfig, which every plan starts with. The
// client is a Terraform that takes write-only attributes (1.11+).
func (t *Terraform) validate(ctx context.Context, name string, cfg *tfprotov6.DynamicValue) error {
	v, err := t.srv.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: name, Config: cfg,
		ClientCapabilities: &tfprotov6.ValidateResourceConfigClientCapabilities{WriteOnlyAttributesAllowed: true}})
	if err != nil {
		return err
	}
	return t.diags("validate "+name, v.Diagnostics)
}

// PlanCreate is the plan walk of `terraform apply` for a resource not yet
// in state: validate, then plan from nothing. Terraform runs it in a
// provider process of its own, and the apply walk in another.
func (t *Terraform) PlanCreate(ctx context.Context, name string, config map[string]any) error {
	_, err := t.planCreate(ctx, name, config)
	return err
}

// ApplyCreate is the apply walk of `terraform apply` for a resource not
// yet in state: validate, plan again (Terraform re-plans before it
// applies, to take in what it learned since), apply. It returns the state
// Terraform would keep.
func (t *Terraform) ApplyCreate(ctx context.Context, name string, config map[string]any) (State, error) {
	c, err := t.planCreate(ctx, name, config)
	if err != nil {
		return State{}, err
	}
	a, err := t.srv.ApplyResourceChange(ctx, &tfprotov6.ApplyResourceChangeRequest{TypeName: name,
		PriorState: c.null, PlannedState: c.plan.PlannedState, Config: c.cfg, PlannedPrivate: c.plan.PlannedPrivate})
	if err != nil {
		return State{}, err
	}
	if err := t.diags("apply "+name, a.Diagnostics); err != nil {
		return State{}, err
	}
	v, err := a.NewState.Unmarshal(c.typ)
	return State{Value: v, Private: a.Private}, err
}

// creation is a create's plan, with what its apply needs.
type creation struct {
	typ       tftypes.Type
	cfg, null *tfprotov6.DynamicValue
	plan      *tfprotov6.PlanResourceChangeResponse
}

func (t *Terraform) planCreate(ctx context.Context, name string, config map[string]any) (creation, error) {
	typ, _, err := t.resourceType(name)
	if err != nil {
		return creation{}, err
	}
	c := creation{typ: typ}
	if c.cfg, err = dynamic(typ, config); err != nil {
		return c, fmt.Errorf("%s config: %w", name, err)
	}
	if err := t.validate(ctx, name, c.cfg); err != nil {
		return c, err
	}
	c.null, _ = dynamic(typ, tftypes.NewValue(typ, nil))
	c.plan, err = t.srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: name,
		PriorState: c.null, ProposedNewState: c.cfg, Config: c.cfg})
	if err != nil {
		return c, err
	}
	return c, t.diags("plan "+name, c.plan.Diagnostics)
}

// Plan is what `terraform plan` concluded for one resource.
type Plan struct {
	Refreshed tftypes.Value // the state after the refresh (ReadResource); null on a create
	Planned   tftypes.Value
	// RequiresReplace are the paths the provider said force a replace and
	// whose value the plan changes (Terraform ignores the others). A plan
	// with any is a replace: Planned is then the create's plan, which
	// Terraform asks for again with no prior state.
	RequiresReplace []*tftypes.AttributePath
	// RefreshDiagnostics are what the refresh reported, Diagnostics what
	// the validation and the plan did (warnings: a plan with errors is an
	// error).
	RefreshDiagnostics []*tfprotov6.Diagnostic
	Diagnostics        []*tfprotov6.Diagnostic

	name    string
	config  tftypes.Value
	private []byte // the refreshed state's
}

// Changes lists what the plan would change, "" when nothing.
func (p Plan) Changes() string {
	diffs, err := p.Refreshed.Diff(p.Planned)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, d := range diffs {
		if d.Value1 != nil && d.Value2 != nil && d.Value1.Type().Is(tftypes.Object{}) {
			continue // an object differs because an attribute in it does: listed on its own
		}
		out = append(out, fmt.Sprintf("%s: %v -> %v", d.Path, d.Value1, d.Value2))
	}
	for _, r := range p.RequiresReplace {
		out = append(out, fmt.Sprintf("%s forces replacement", r))
	}
	return strings.Join(out, "\n")
}

// Plan is `terraform plan` of a resource in state: validate the
// configuration, upgrade the stored state, refresh it (ReadResource), and
// plan from the refreshed state with what Terraform proposes.
func (t *Terraform) Plan(ctx context.Context, name string, config map[string]any, st State) (Plan, error) {
	typ, schema, err := t.resourceType(name)
	if err != nil {
		return Plan{}, err
	}
	cfgVal, err := valueOf(typ, config)
	if err != nil {
		return Plan{}, fmt.Errorf("%s config: %w", name, err)
	}
	cfg, _ := dynamic(typ, cfgVal)
	seen := len(t.all)
	if err := t.validate(ctx, name, cfg); err != nil {
		return Plan{}, err
	}
	validated := slices.Clone(t.all[seen:])
	seen = len(t.all)
	refreshed, private, err := t.refresh(ctx, name, typ, st)
	refreshDiags := slices.Clone(t.all[seen:])
	var p Plan
	switch {
	case errors.Is(err, ErrGone):
		// Gone from state: Terraform plans to create it.
		p, err = t.PlanNew(ctx, name, config)
		validated = nil // PlanNew validated again
	case err != nil:
		return Plan{RefreshDiagnostics: refreshDiags}, err
	default:
		p, err = t.planFrom(ctx, name, schema, cfgVal, refreshed, private)
	}
	p.RefreshDiagnostics = refreshDiags
	p.Diagnostics = append(validated, p.Diagnostics...)
	return p, err
}

// PlanNew is `terraform plan` of a resource not yet in state: validate,
// then plan from nothing.
func (t *Terraform) PlanNew(ctx context.Context, name string, config map[string]any) (Plan, error) {
	seen := len(t.all)
	c, err := t.planCreate(ctx, name, config)
	if c.plan == nil {
		return Plan{}, err
	}
	p := Plan{name: name, Refreshed: tftypes.NewValue(c.typ, nil), Diagnostics: slices.Clone(t.all[seen:])}
	p.config, _ = c.cfg.Unmarshal(c.typ)
	if err != nil {
		return p, err
	}
	p.Planned, err = c.plan.PlannedState.Unmarshal(c.typ)
	return p, err
}

// refresh is UpgradeResourceState on the stored JSON, then ReadResource.
func (t *Terraform) refresh(ctx context.Context, name string, typ tftypes.Type, st State) (*tfprotov6.DynamicValue, []byte, error) {
	raw, err := rawState(st.Value)
	if err != nil {
		return nil, nil, err
	}
	u, err := t.srv.UpgradeResourceState(ctx, &tfprotov6.UpgradeResourceStateRequest{TypeName: name, RawState: raw})
	if err != nil {
		return nil, nil, err
	}
	if err := t.diags("upgrade "+name+" state", u.Diagnostics); err != nil {
		return nil, nil, err
	}
	r, err := t.srv.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: name, CurrentState: u.UpgradedState, Private: st.Private})
	if err != nil {
		return nil, nil, err
	}
	if err := t.diags("refresh "+name, r.Diagnostics); err != nil {
		return nil, nil, err
	}
	v, err := r.NewState.Unmarshal(typ)
	if err != nil {
		return nil, nil, fmt.Errorf("refresh %s: %w", name, err)
	}
	if v.IsNull() {
		return nil, nil, fmt.Errorf("refresh %s: %w", name, ErrGone)
	}
	return r.NewState, r.Private, nil
}

// ErrGone is a refresh that found the resource gone: Terraform drops it
// from state and plans to create it.
var ErrGone = errors.New("the provider found the resource gone")

// planFrom is PlanResourceChange from the refreshed state; when the plan
// requires a replace, Terraform plans the create again with no prior state
// (and the first plan's private state), as its plan walk does.
func (t *Terraform) planFrom(ctx context.Context, name string, schema *tfprotov6.Schema, cfgVal tftypes.Value,
	refreshed *tfprotov6.DynamicValue, private []byte) (Plan, error) {
	typ := schema.ValueType()
	prior, err := refreshed.Unmarshal(typ)
	if err != nil {
		return Plan{}, err
	}
	out := Plan{name: name, Refreshed: prior, config: cfgVal, private: private}
	proposedVal, err := proposedNew(schema.Block.Attributes, prior, cfgVal)
	if err != nil {
		return out, fmt.Errorf("proposed new state: %w", err)
	}
	cfg, _ := dynamic(typ, cfgVal)
	proposed, _ := dynamic(typ, proposedVal)
	p, err := t.srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: name,
		PriorState: refreshed, ProposedNewState: proposed, Config: cfg, PriorPrivate: private})
	if err != nil {
		return out, err
	}
	out.Diagnostics = p.Diagnostics
	if err := t.diags("plan "+name, p.Diagnostics); err != nil {
		return out, err
	}
	if out.Planned, err = p.PlannedState.Unmarshal(typ); err != nil {
		return out, err
	}
	if out.RequiresReplace = changedPaths(p.RequiresReplace, prior, out.Planned); len(out.RequiresReplace) == 0 {
		return out, nil
	}
	null, _ := dynamic(typ, tftypes.NewValue(typ, nil))
	c, err := t.srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: name,
		PriorState: null, ProposedNewState: cfg, Config: cfg, PriorPrivate: p.PlannedPrivate})
	if err != nil {
		return out, err
	}
	out.Diagnostics = append(out.Diagnostics, c.Diagnostics...)
	if err := t.diags("plan "+name+" (replacement)", c.Diagnostics); err != nil {
		return out, err
	}
	out.Planned, err = c.PlannedState.Unmarshal(typ)
	return out, err
}

// changedPaths keeps the paths whose value differs between prior and
// planned, as Terraform does with a plan's RequiresReplace: a path that
// leads nowhere on one side is null there, an unknown planned value
// differs, a path that leads nowhere on both sides is dropped.
func changedPaths(paths []*tftypes.AttributePath, prior, planned tftypes.Value) []*tftypes.AttributePath {
	var out []*tftypes.AttributePath
	for _, p := range paths {
		a, aok := valueAt(prior, p)
		b, bok := valueAt(planned, p)
		switch {
		case !aok && !bok:
		case !aok:
			if !b.IsNull() {
				out = append(out, p)
			}
		case !bok:
			if !a.IsNull() {
				out = append(out, p)
			}
		case !b.IsFullyKnown() || !a.Equal(b):
			out = append(out, p)
		}
	}
	return out
}

// valueAt is the value at path p in v, if p leads to one.
func valueAt(v tftypes.Value, p *tftypes.AttributePath) (tftypes.Value, bool) {
	got, _, err := tftypes.WalkAttributePath(v, p)
	if err != nil {
		return tftypes.Value{}, false
	}
	at, ok := got.(tftypes.Value)
	return at, ok
}

// Apply is the apply walk of `terraform apply` that carries out p, made by
// Plan in the plan walk's provider (another process): validate, then an
// update in place, or, where p replaces, the destroy and then the create
// (Terraform's default order). Each is planned again before it is applied,
// as Terraform's apply walk does. It returns the state Terraform keeps.
func (t *Terraform) Apply(ctx context.Context, p Plan) (State, error) {
	typ, schema, err := t.resourceType(p.name)
	if err != nil {
		return State{}, err
	}
	cfg, _ := dynamic(typ, p.config)
	if err := t.validate(ctx, p.name, cfg); err != nil {
		return State{}, err
	}
	prior, _ := dynamic(typ, p.Refreshed)
	if p.Refreshed.IsNull() {
		return t.applyCreate(ctx, p.name, typ, cfg)
	}
	if len(p.RequiresReplace) > 0 {
		if err := t.applyDestroy(ctx, p.name, typ, prior, p.private); err != nil {
			return State{}, err
		}
		return t.applyCreate(ctx, p.name, typ, cfg)
	}
	proposedVal, err := proposedNew(schema.Block.Attributes, p.Refreshed, p.config)
	if err != nil {
		return State{}, fmt.Errorf("proposed new state: %w", err)
	}
	proposed, _ := dynamic(typ, proposedVal)
	again, err := t.srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: p.name,
		PriorState: prior, ProposedNewState: proposed, Config: cfg, PriorPrivate: p.private})
	if err != nil {
		return State{}, err
	}
	if err := t.diags("plan "+p.name, again.Diagnostics); err != nil {
		return State{}, err
	}
	a, err := t.srv.ApplyResourceChange(ctx, &tfprotov6.ApplyResourceChangeRequest{TypeName: p.name,
		PriorState: prior, PlannedState: again.PlannedState, Config: cfg, PlannedPrivate: again.PlannedPrivate})
	if err != nil {
		return State{}, err
	}
	if err := t.diags("apply "+p.name, a.Diagnostics); err != nil {
		return State{}, err
	}
	v, err := a.NewState.Unmarshal(typ)
	return State{Value: v, Private: a.Private}, err
}

// applyCreate plans the create again from nothing and applies it.
func (t *Terraform) applyCreate(ctx context.Context, name string, typ tftypes.Type, cfg *tfprotov6.DynamicValue) (State, error) {
	null, _ := dynamic(typ, tftypes.NewValue(typ, nil))
	c, err := t.srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: name,
		PriorState: null, ProposedNewState: cfg, Config: cfg})
	if err != nil {
		return State{}, err
	}
	if err := t.diags("plan "+name, c.Diagnostics); err != nil {
		return State{}, err
	}
	a, err := t.srv.ApplyResourceChange(ctx, &tfprotov6.ApplyResourceChangeRequest{TypeName: name,
		PriorState: null, PlannedState: c.PlannedState, Config: cfg, PlannedPrivate: c.PlannedPrivate})
	if err != nil {
		return State{}, err
	}
	if err := t.diags("apply "+name, a.Diagnostics); err != nil {
		return State{}, err
	}
	v, err := a.NewState.Unmarshal(typ)
	return State{Value: v, Private: a.Private}, err
}

// applyDestroy is ApplyResourceChange to nothing: the provider's Delete.
func (t *Terraform) applyDestroy(ctx context.Context, name string, typ tftypes.Type, prior *tfprotov6.DynamicValue, private []byte) error {
	null, _ := dynamic(typ, tftypes.NewValue(typ, nil))
	a, err := t.srv.ApplyResourceChange(ctx, &tfprotov6.ApplyResourceChangeRequest{TypeName: name,
		PriorState: prior, PlannedState: null, Config: null, PlannedPrivate: private})
	if err != nil {
		return err
	}
	return t.diags("destroy "+name, a.Diagnostics)
}

// Destroy is `terraform destroy` of a resource in state: the normal plan
// Terraform runs first to refresh (whose errors block the destroy), the
// destroy's plan, then the destroy. Terraform applies it with another
// provider process; the destroy reads nothing the plan left, so one does.
func (t *Terraform) Destroy(ctx context.Context, name string, config map[string]any, st State) error {
	p, err := t.Plan(ctx, name, config, st)
	if err != nil {
		return err
	}
	typ, _, err := t.resourceType(name)
	if err != nil {
		return err
	}
	prior, _ := dynamic(typ, p.Refreshed)
	null, _ := dynamic(typ, tftypes.NewValue(typ, nil))
	d, err := t.srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: name,
		PriorState: prior, ProposedNewState: null, Config: null, PriorPrivate: p.private})
	if err != nil {
		return err
	}
	if err := t.diags("plan destroy "+name, d.Diagnostics); err != nil {
		return err
	}
	return t.applyDestroy(ctx, name, typ, prior, p.private)
}

// Import is `terraform import <address> <id>`: ImportResourceState, then
// the refresh of what it returned (ReadResource, with no configuration).
// It returns the state Terraform keeps.
func (t *Terraform) Import(ctx context.Context, name, id string) (State, error) {
	typ, _, err := t.resourceType(name)
	if err != nil {
		return State{}, err
	}
	im, err := t.srv.ImportResourceState(ctx, &tfprotov6.ImportResourceStateRequest{TypeName: name, ID: id})
	if err != nil {
		return State{}, err
	}
	if err := t.diags("import "+name, im.Diagnostics); err != nil {
		return State{}, err
	}
	if len(im.ImportedResources) != 1 {
		return State{}, fmt.Errorf("import %s: the provider returned %d resources, want 1", name, len(im.ImportedResources))
	}
	got := im.ImportedResources[0]
	r, err := t.srv.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: name, CurrentState: got.State, Private: got.Private})
	if err != nil {
		return State{}, err
	}
	if err := t.diags("refresh "+name, r.Diagnostics); err != nil {
		return State{}, err
	}
	v, err := r.NewState.Unmarshal(typ)
	if err == nil && v.IsNull() {
		err = fmt.Errorf("import %s: %w", name, ErrGone)
	}
	return State{Value: v, Private: r.Private}, err
}

// ReadData is a data source's read in `terraform plan`: validate, then
// read. It returns the data source's value as JSON holds it (objects as
// maps, lists as slices, numbers as float64), or a *StepError.
func (t *Terraform) ReadData(ctx context.Context, name string, config map[string]any) (map[string]any, error) {
	s, ok := t.schemas.DataSourceSchemas[name]
	if !ok {
		return nil, fmt.Errorf("no data source %s", name)
	}
	cfg, err := dynamic(s.ValueType(), config)
	if err != nil {
		return nil, err
	}
	v, err := t.srv.ValidateDataResourceConfig(ctx, &tfprotov6.ValidateDataResourceConfigRequest{TypeName: name, Config: cfg})
	if err != nil {
		return nil, err
	}
	if err := t.diags("validate data."+name, v.Diagnostics); err != nil {
		return nil, err
	}
	r, err := t.srv.ReadDataSource(ctx, &tfprotov6.ReadDataSourceRequest{TypeName: name, Config: cfg})
	if err != nil {
		return nil, err
	}
	if err := t.diags("read data."+name, r.Diagnostics); err != nil {
		return nil, err
	}
	val, err := r.State.Unmarshal(s.ValueType())
	if err != nil {
		return nil, err
	}
	j, err := jsonOf(val)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(b, &out)
}
