package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Close closes the provider's connections, as its process ending would.
func (t *Terraform) Close() { t.Pool().Close() }

// diags keeps warnings and turns errors into one error naming the step.
func (t *Terraform) diags(step string, ds []*tfprotov6.Diagnostic) error {
	var errs []string
	for _, d := range ds {
		line := d.Summary + ": " + d.Detail
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			errs = append(errs, line)
		} else {
			t.warnings = append(t.warnings, line)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %s", step, strings.Join(errs, "\n"))
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

// validate is ValidateResourceConfig, which every plan starts with.
func (t *Terraform) validate(ctx context.Context, name string, cfg *tfprotov6.DynamicValue) error {
	v, err := t.srv.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: name, Config: cfg})
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

// Plan is what `terraform plan` concluded for one resource in state.
type Plan struct {
	Refreshed       tftypes.Value // the state after the refresh (ReadResource)
	Planned         tftypes.Value
	RequiresReplace []*tftypes.AttributePath
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
	if err := t.validate(ctx, name, cfg); err != nil {
		return Plan{}, err
	}
	refreshed, private, err := t.refresh(ctx, name, typ, st)
	if err != nil {
		return Plan{}, err
	}
	return t.planFrom(ctx, name, schema, cfgVal, refreshed, private)
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
		return nil, nil, fmt.Errorf("refresh %s: the provider found the resource gone", name)
	}
	return r.NewState, r.Private, nil
}

// planFrom is PlanResourceChange from the refreshed state.
func (t *Terraform) planFrom(ctx context.Context, name string, schema *tfprotov6.Schema, cfgVal tftypes.Value,
	refreshed *tfprotov6.DynamicValue, private []byte) (Plan, error) {
	typ := schema.ValueType()
	prior, err := refreshed.Unmarshal(typ)
	if err != nil {
		return Plan{}, err
	}
	proposedVal, err := proposedNew(schema.Block.Attributes, prior, cfgVal)
	if err != nil {
		return Plan{}, fmt.Errorf("proposed new state: %w", err)
	}
	cfg, _ := dynamic(typ, cfgVal)
	proposed, _ := dynamic(typ, proposedVal)
	p, err := t.srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: name,
		PriorState: refreshed, ProposedNewState: proposed, Config: cfg, PriorPrivate: private})
	if err != nil {
		return Plan{}, err
	}
	if err := t.diags("plan "+name, p.Diagnostics); err != nil {
		return Plan{}, err
	}
	planned, err := p.PlannedState.Unmarshal(typ)
	return Plan{Refreshed: prior, Planned: planned, RequiresReplace: p.RequiresReplace}, err
}
