package resources

import (
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
)

var transitionName = []string{"null to a value", "a value to another", "a value to null"}

// setAt sets the model's field at a dotted path (tfsdk tags; "*" is the
// worker "w").
func setAt(t *testing.T, model any, p string, v attr.Value) {
	t.Helper()
	cur := reflect.ValueOf(model).Elem()
	parts := strings.Split(p, ".")
	for i, part := range parts {
		if part == "*" {
			cur = cur.MapIndex(reflect.ValueOf("w")).Elem()
			continue
		}
		f, ok := fieldByTag(cur, part)
		if !ok {
			t.Fatalf("%s: no field tagged %q in %s", p, part, cur.Type())
		}
		if i == len(parts)-1 {
			f.Set(reflect.ValueOf(v))
			return
		}
		if f.Kind() == reflect.Pointer {
			f = f.Elem()
		}
		cur = f
	}
}

func fieldByTag(v reflect.Value, tag string) (reflect.Value, bool) {
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		if sf.Anonymous {
			if f, ok := fieldByTag(v.Field(i), tag); ok {
				return f, true
			}
			continue
		}
		if sf.Tag.Get("tfsdk") == tag {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func deploymentModel() *vllmModel {
	return &vllmModel{Head: &headAccess{}, Runtime: &runtimeModel{}, Port: types.Int64Value(8000), Host: types.StringValue("0.0.0.0"),
		Model: types.StringValue("m"), Env: types.MapNull(types.StringType), ExtraArgs: types.ListNull(types.StringType)}
}

func clusterWithWorker() *clusterModel {
	w := &rayNodeModel{NodeAccess: schemaparts.NodeAccess{SSHHost: types.StringValue("10.0.0.2")},
		NumGPUs: types.Int64Value(1), Resources: types.MapValueMust(types.Float64Type, map[string]attr.Value{}),
		Labels: types.MapValueMust(types.StringType, map[string]attr.Value{})}
	return &clusterModel{Head: &rayNodeModel{}, Workers: map[string]*rayNodeModel{"w": w}}
}

// Each restart row restarts on every change, and every row that neither
// restarts nor replaces really restarts nothing: needsRestart for the
// deployment's server, sameNode for a cluster's worker.
func TestAttributeChangesThatRestart(t *testing.T) {
	depAttrs, clusterAttrs := map[string]schema.Attribute{}, map[string]schema.Attribute{}
	configurable(schemaOf(t, NewVLLMDeployment()).Attributes, "", depAttrs)
	configurable(schemaOf(t, NewRayCluster()).Attributes, "", clusterAttrs)
	for _, row := range deploymentChanges {
		a := depAttrs[row.path]
		if row.effect == replaces || row.effect == planned || strings.HasPrefix(row.path, "timeouts") || a == nil {
			continue
		}
		for i, tr := range transitions(a.GetType()) {
			old, n := deploymentModel(), deploymentModel()
			setAt(t, old, row.path, tr[0])
			setAt(t, n, row.path, tr[1])
			if got, want := needsRestart(old, n), row.effect == restartsServer; got != want {
				t.Errorf("spark_vllm_deployment: %s %s: needsRestart = %v, the table says %v", row.path, transitionName[i], got, want)
			}
		}
	}
	for _, row := range clusterChanges {
		a := clusterAttrs[row.path]
		if !strings.HasPrefix(row.path, "workers.*.") || a == nil {
			continue
		}
		for i, tr := range transitions(a.GetType()) {
			old, n := clusterWithWorker(), clusterWithWorker()
			setAt(t, old, row.path, tr[0])
			setAt(t, n, row.path, tr[1])
			if i == 2 && row.toNull == rayCount {
				continue
			}
			if got, want := !sameNode(old.Workers["w"], n.Workers["w"]), row.effect == restartsWorker; got != want {
				t.Errorf("spark_ray_cluster: %s %s: restarts the worker = %v, the table says %v", row.path, transitionName[i], got, want)
			}
		}
	}
}

// Resources and labels removed from a configuration are planned as Ray's
// defaults (none), not as the prior state's: the change reaches the node.
func TestNullPlansRayDefaults(t *testing.T) {
	state := clusterWithWorker()
	state.Workers["w"].Resources = types.MapValueMust(types.Float64Type, map[string]attr.Value{"spark.a": types.Float64Value(1)})
	state.Workers["w"].Labels = types.MapValueMust(types.StringType, map[string]attr.Value{"rack": types.StringValue("r1")})
	plan, config := clusterWithWorker(), clusterWithWorker()
	// What the framework plans for optional, computed attributes left null: the prior state's values.
	plan.Workers["w"].Resources, plan.Workers["w"].Labels = state.Workers["w"].Resources, state.Workers["w"].Labels
	config.Workers["w"].Resources, config.Workers["w"].Labels = types.MapNull(types.Float64Type), types.MapNull(types.StringType)
	planRayDefaults(plan, config)
	if sameNode(state.Workers["w"], plan.Workers["w"]) {
		t.Fatalf("resources and labels removed from the configuration restart nothing: planned %v %v", plan.Workers["w"].Resources, plan.Workers["w"].Labels)
	}
	if sameCustom(state.Workers["w"], plan.Workers["w"]) {
		t.Fatal("sameCustom, which replaces the head, sees no change")
	}
	if n := len(plan.Workers["w"].Resources.Elements()) + len(plan.Workers["w"].Labels.Elements()); n != 0 {
		t.Fatalf("planned %d custom resources and labels, want none", n)
	}
	// Set in the configuration, they are planned as given.
	plan2, config2 := clusterWithWorker(), clusterWithWorker()
	config2.Workers["w"].Resources = state.Workers["w"].Resources
	plan2.Workers["w"].Resources = state.Workers["w"].Resources
	planRayDefaults(plan2, config2)
	if !plan2.Workers["w"].Resources.Equal(state.Workers["w"].Resources) {
		t.Fatalf("configured resources replaced: %v", plan2.Workers["w"].Resources)
	}
}

// The table as the README's reader wants it: printed with -v.
func TestAttributeChangeTableListing(t *testing.T) {
	names := map[effect]string{replaces: "replaces the resource", restartsServer: "restarts vLLM", restartsWorker: "restarts that worker",
		changesNothing: "changes nothing that runs", planned: "decided at plan from the nodes"}
	for _, tbl := range [][]attributeChange{clusterChanges, deploymentChanges} {
		rows := slices.Clone(tbl)
		sort.Slice(rows, func(i, j int) bool { return rows[i].path < rows[j].path })
		for _, r := range rows {
			t.Logf("%-32s %s %s %s", r.path, names[r.effect], r.why, r.toNull)
		}
	}
}
