package resources

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// What changing an attribute does to what runs. Every attribute a
// configuration can set has one row (the tests below enumerate the schema,
// so a new attribute without a row fails them), and each row is checked
// for the three changes a configuration makes: null to a value, a value to
// another, a value to null.
type effect int

const (
	// replaces: the resource is destroyed and created again (a plan
	// modifier of the attribute, or of an object holding it, says so).
	replaces effect = iota
	// restartsServer: the deployment stops its server and starts it with
	// the new settings (needsRestart).
	restartsServer
	// restartsWorker: Ray on that worker only is stopped and started again
	// (sameNode).
	restartsWorker
	// changesNothing: nothing that runs depends on it (the row says why).
	changesNothing
	// planned: the resource's ModifyPlan decides from what the nodes report,
	// which only the lab can show; the row names the acceptance test.
	planned
)

type attributeChange struct {
	path   string // dotted; "*" for a map key
	effect effect
	why    string // changesNothing: why; planned: the acceptance test that shows it
	// toNull: a value removed is not the attribute's own plan modifiers'
	// business but ModifyPlan's, as this says.
	toNull string
}

const (
	rayDefaults = "planned as Ray's default (none of ours) by planRayDefaults; TestNullPlansRayDefaults"
	rayCount    = "kept as Ray registered it: Ray's own count is not knowable before it starts on a node without nvidia-smi"
)

var clusterChanges = []attributeChange{
	{path: "head", effect: replaces},
	{path: "head.ssh_host", effect: replaces},
	{path: "head.ssh_port", effect: replaces},
	{path: "head.ssh_user", effect: replaces},
	{path: "head.host_key", effect: changesNothing, why: "checks the node's identity; the plan fails when it does not match"},
	{path: "head.node_ip", effect: planned, why: "TestAccRayCluster_fabricLifecycle"},
	{path: "head.num_gpus", effect: replaces, toNull: rayCount},
	{path: "head.resources", effect: replaces, toNull: rayDefaults},
	{path: "head.labels", effect: replaces, toNull: rayDefaults},
	{path: "head.interface", effect: replaces},
	{path: "workers", effect: changesNothing, why: "adding or removing a worker starts or stops that worker only (the keys' rows)"},
	{path: "workers.*.ssh_host", effect: restartsWorker},
	{path: "workers.*.ssh_port", effect: restartsWorker},
	{path: "workers.*.ssh_user", effect: restartsWorker},
	{path: "workers.*.host_key", effect: changesNothing, why: "checks the node's identity; the plan fails when it does not match"},
	{path: "workers.*.node_ip", effect: restartsWorker},
	{path: "workers.*.num_gpus", effect: restartsWorker, toNull: rayCount},
	{path: "workers.*.resources", effect: restartsWorker, toNull: rayDefaults},
	{path: "workers.*.labels", effect: restartsWorker, toNull: rayDefaults},
	{path: "workers.*.interface", effect: restartsWorker},
	{path: "runtime", effect: replaces},
	{path: "runtime.host", effect: replaces},
	{path: "runtime.host.ray_command", effect: replaces},
	{path: "runtime.container", effect: replaces},
	{path: "runtime.container.image", effect: replaces},
	{path: "runtime.container.name", effect: replaces},
	{path: "runtime.container.shm_size", effect: replaces},
	{path: "runtime.container.gpus", effect: replaces},
	{path: "runtime.container.run_args", effect: replaces},
	{path: "runtime.container.ray_command", effect: replaces},
	{path: "gcs_port", effect: replaces},
	{path: "env", effect: replaces},
	{path: "secret_env_wo", effect: changesNothing, why: "write-only, never in state to compare: secret_env_wo_version says when it changed"},
	{path: "secret_env_wo_version", effect: replaces},
	{path: "start_args", effect: replaces},
	{path: "dashboard_host", effect: replaces},
	{path: "auth_mode", effect: replaces},
	{path: "fabric_probe", effect: changesNothing, why: "what the plan measures; Ray runs as before (TestAccRayCluster_fabricProbe)"},
	{path: "fabric_probe.min_gbps", effect: changesNothing, why: "the floor the plan judges the measured link by"},
	{path: "timeouts", effect: changesNothing, why: "how long the provider waits"},
	{path: "timeouts.create", effect: changesNothing, why: "how long the provider waits"},
	{path: "timeouts.update", effect: changesNothing, why: "how long the provider waits"},
	{path: "timeouts.delete", effect: changesNothing, why: "how long the provider waits"},
}

var deploymentChanges = []attributeChange{
	{path: "head", effect: replaces},
	{path: "head.ssh_host", effect: replaces},
	{path: "head.ssh_port", effect: replaces},
	{path: "head.ssh_user", effect: replaces},
	{path: "head.host_key", effect: changesNothing, why: "checks the node's identity; the plan fails when it does not match"},
	{path: "runtime", effect: replaces},
	{path: "runtime.host", effect: replaces},
	{path: "runtime.host.ray_command", effect: replaces},
	{path: "runtime.container", effect: replaces},
	{path: "runtime.container.image", effect: replaces},
	{path: "runtime.container.name", effect: replaces},
	{path: "runtime.container.shm_size", effect: replaces},
	{path: "runtime.container.gpus", effect: replaces},
	{path: "runtime.container.run_args", effect: replaces},
	{path: "runtime.container.ray_command", effect: replaces},
	{path: "ray_address", effect: restartsServer},
	{path: "model", effect: restartsServer},
	{path: "served_model_name", effect: restartsServer},
	{path: "tensor_parallel_size", effect: restartsServer},
	{path: "pipeline_parallel_size", effect: restartsServer},
	{path: "host_ip", effect: restartsServer},
	{path: "port", effect: replaces},
	{path: "host", effect: restartsServer},
	{path: "api_key_wo", effect: changesNothing, why: "write-only, never in state to compare: api_key_wo_version says when it changed"},
	{path: "api_key_wo_version", effect: restartsServer},
	{path: "api_key_file", effect: restartsServer},
	{path: "secret_env_wo", effect: changesNothing, why: "write-only, never in state to compare: secret_env_wo_version says when it changed"},
	{path: "secret_env_wo_version", effect: restartsServer},
	{path: "env", effect: restartsServer},
	{path: "extra_args", effect: restartsServer},
	{path: "vllm_command", effect: restartsServer},
	{path: "timeouts", effect: changesNothing, why: "how long the provider waits"},
	{path: "timeouts.create", effect: changesNothing, why: "how long the provider waits"},
	{path: "timeouts.update", effect: changesNothing, why: "how long the provider waits"},
	{path: "timeouts.delete", effect: changesNothing, why: "how long the provider waits"},
}

func schemaOf(t *testing.T, r resource.Resource) schema.Schema {
	t.Helper()
	var resp resource.SchemaResponse
	r.Schema(context.Background(), resource.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	return resp.Schema
}

// configurable lists every path a configuration can set, nested objects
// included, with the attribute there.
func configurable(attrs map[string]schema.Attribute, prefix string, out map[string]schema.Attribute) {
	for name, a := range attrs {
		if !a.IsOptional() && !a.IsRequired() {
			continue // computed only
		}
		p := prefix + name
		out[p] = a
		switch n := a.(type) {
		case schema.SingleNestedAttribute:
			configurable(n.Attributes, p+".", out)
		case schema.MapNestedAttribute:
			configurable(n.NestedObject.Attributes, p+".*.", out)
		}
	}
}

func TestEveryAttributeHasAChangeRow(t *testing.T) {
	for _, c := range []struct {
		name  string
		r     resource.Resource
		table []attributeChange
	}{{"spark_ray_cluster", NewRayCluster(), clusterChanges}, {"spark_vllm_deployment", NewVLLMDeployment(), deploymentChanges}} {
		got := map[string]schema.Attribute{}
		configurable(schemaOf(t, c.r).Attributes, "", got)
		rows := map[string]bool{}
		for _, row := range c.table {
			if rows[row.path] {
				t.Errorf("%s: two rows for %s", c.name, row.path)
			}
			rows[row.path] = true
			if _, ok := got[row.path]; !ok {
				t.Errorf("%s: row %s names no attribute a configuration can set", c.name, row.path)
			}
			if (row.effect == changesNothing || row.effect == planned) && row.why == "" {
				t.Errorf("%s: row %s says neither why nothing changes nor which test shows it", c.name, row.path)
			}
		}
		for _, p := range slices.Sorted(mapKeys(got)) {
			if !rows[p] {
				t.Errorf("%s: %s has no row in the attribute-change table: say what changing it does", c.name, p)
			}
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// transitions are the three changes, as (state, plan) pairs of a type's
// sample values.
func transitions(typ attr.Type) [][2]attr.Value {
	null, a, b := nullOf(typ), sampleValue(typ, 0), sampleValue(typ, 1)
	return [][2]attr.Value{{null, a}, {a, b}, {a, null}}
}

func nullOf(typ attr.Type) attr.Value {
	v, err := typ.ValueFromTerraform(context.Background(), tftypes.NewValue(typ.TerraformType(context.Background()), nil))
	if err != nil {
		panic(err)
	}
	return v
}

// sampleValue is a value of typ; variant 0 and 1 differ in every leaf.
func sampleValue(typ attr.Type, variant int) attr.Value {
	switch tt := typ.(type) {
	case basetypes.StringType:
		return types.StringValue([]string{"a", "b"}[variant])
	case basetypes.Int64Type:
		return types.Int64Value(int64(1 + variant))
	case basetypes.Float64Type:
		return types.Float64Value(float64(1 + variant))
	case basetypes.BoolType:
		return types.BoolValue(variant == 0)
	case types.MapType:
		return types.MapValueMust(tt.ElemType, map[string]attr.Value{"k": sampleValue(tt.ElemType, variant)})
	case types.ListType:
		return types.ListValueMust(tt.ElemType, []attr.Value{sampleValue(tt.ElemType, variant)})
	case types.ObjectType:
		vals := map[string]attr.Value{}
		for k, et := range tt.AttrTypes {
			vals[k] = sampleValue(et, variant)
		}
		return types.ObjectValueMust(tt.AttrTypes, vals)
	}
	panic("sample: no value for type " + typ.String())
}

// replacesOn runs the attribute's own plan modifiers for one change, as the
// framework runs them on an update (prior state and plan both present,
// the configuration as the plan), and says whether one requires a replace.
func replacesOn(t *testing.T, a schema.Attribute, old, n attr.Value) bool {
	t.Helper()
	ctx := context.Background()
	present := tftypes.NewValue(tftypes.Object{}, map[string]tftypes.Value{})
	st, pl, cf := tfsdk.State{Raw: present}, tfsdk.Plan{Raw: present}, tfsdk.Config{Raw: present}
	switch x := a.(type) {
	case schema.StringAttribute:
		for _, m := range x.PlanModifiers {
			resp := &planmodifier.StringResponse{PlanValue: n.(types.String)}
			m.PlanModifyString(ctx, planmodifier.StringRequest{State: st, Plan: pl, Config: cf, StateValue: old.(types.String), PlanValue: n.(types.String), ConfigValue: n.(types.String)}, resp)
			if resp.RequiresReplace {
				return true
			}
		}
	case schema.Int64Attribute:
		for _, m := range x.PlanModifiers {
			resp := &planmodifier.Int64Response{PlanValue: n.(types.Int64)}
			m.PlanModifyInt64(ctx, planmodifier.Int64Request{State: st, Plan: pl, Config: cf, StateValue: old.(types.Int64), PlanValue: n.(types.Int64), ConfigValue: n.(types.Int64)}, resp)
			if resp.RequiresReplace {
				return true
			}
		}
	case schema.MapAttribute:
		for _, m := range x.PlanModifiers {
			resp := &planmodifier.MapResponse{PlanValue: n.(types.Map)}
			m.PlanModifyMap(ctx, planmodifier.MapRequest{State: st, Plan: pl, Config: cf, StateValue: old.(types.Map), PlanValue: n.(types.Map), ConfigValue: n.(types.Map)}, resp)
			if resp.RequiresReplace {
				return true
			}
		}
	case schema.ListAttribute:
		for _, m := range x.PlanModifiers {
			resp := &planmodifier.ListResponse{PlanValue: n.(types.List)}
			m.PlanModifyList(ctx, planmodifier.ListRequest{State: st, Plan: pl, Config: cf, StateValue: old.(types.List), PlanValue: n.(types.List), ConfigValue: n.(types.List)}, resp)
			if resp.RequiresReplace {
				return true
			}
		}
	case schema.SingleNestedAttribute:
		for _, m := range x.PlanModifiers {
			resp := &planmodifier.ObjectResponse{PlanValue: n.(types.Object)}
			m.PlanModifyObject(ctx, planmodifier.ObjectRequest{State: st, Plan: pl, Config: cf, StateValue: old.(types.Object), PlanValue: n.(types.Object), ConfigValue: n.(types.Object)}, resp)
			if resp.RequiresReplace {
				return true
			}
		}
	}
	return false
}

// ancestors are the path's enclosing attributes, innermost first, and the
// attribute itself first of all.
func ancestors(p string) []string {
	out := []string{p}
	for i := strings.LastIndex(p, "."); i > 0; i = strings.LastIndex(p, ".") {
		p = p[:i]
		if !strings.HasSuffix(p, ".*") {
			out = append(out, p)
		} else {
			p = strings.TrimSuffix(p, ".*")
			out = append(out, p)
		}
	}
	return out
}

// Each replace row: every change of the attribute (or, for an attribute
// inside an object, every change of that object) requires a replace; and
// no other row does.
func TestAttributeChangesThatReplace(t *testing.T) {
	for _, c := range []struct {
		name  string
		r     resource.Resource
		table []attributeChange
	}{{"spark_ray_cluster", NewRayCluster(), clusterChanges}, {"spark_vllm_deployment", NewVLLMDeployment(), deploymentChanges}} {
		attrs := map[string]schema.Attribute{}
		configurable(schemaOf(t, c.r).Attributes, "", attrs)
		for _, row := range c.table {
			a, ok := attrs[row.path]
			if !ok || row.path == "head" || row.path == "workers" || strings.HasPrefix(row.path, "timeouts") {
				continue // the nested attributes' rows say it; "head" is required, never null
			}
			for i, tr := range transitions(a.GetType()) {
				if i == 2 && row.toNull != "" {
					continue
				}
				got := false
				for _, p := range ancestors(row.path) {
					if p == row.path {
						got = got || replacesOn(t, a, tr[0], tr[1])
					} else if anc, ok := attrs[p]; ok && p != "workers" && p != "head" {
						at := transitions(anc.GetType())[i]
						got = got || replacesOn(t, anc, at[0], at[1])
					}
				}
				if want := row.effect == replaces; got != want {
					t.Errorf("%s: %s %s: replaces = %v, the table says %v", c.name, row.path, transitionName[i], got, want)
				}
			}
		}
	}
}
