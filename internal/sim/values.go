package sim

import (
	"fmt"
	"math/big"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// valueOf builds a value of type typ from plain Go values, as a
// configuration written in HCL would be: maps for objects and maps, slices
// for lists, int or float64 for numbers; what an object leaves out is null;
// a tftypes.Value is taken as it is (Unknown makes an unknown one).
func valueOf(typ tftypes.Type, v any) (tftypes.Value, error) {
	switch x := v.(type) {
	case nil:
		return tftypes.NewValue(typ, nil), nil
	case tftypes.Value: // as it is: an unknown value, a reference to what is not created yet
		return x, nil
	}
	switch typ := typ.(type) {
	case tftypes.Object:
		return objectOf(typ, v)
	case tftypes.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return tftypes.Value{}, fmt.Errorf("want a map for %s, got %T", typ, v)
		}
		out := map[string]tftypes.Value{}
		for k, e := range m {
			ev, err := valueOf(typ.ElementType, e)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("[%q]: %w", k, err)
			}
			out[k] = ev
		}
		return tftypes.NewValue(typ, out), nil
	case tftypes.List:
		l, ok := v.([]any)
		if !ok {
			return tftypes.Value{}, fmt.Errorf("want a list for %s, got %T", typ, v)
		}
		out := make([]tftypes.Value, len(l))
		for i, e := range l {
			ev, err := valueOf(typ.ElementType, e)
			if err != nil {
				return tftypes.Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = ev
		}
		return tftypes.NewValue(typ, out), nil
	}
	switch x := v.(type) {
	case int:
		return tftypes.NewValue(typ, big.NewFloat(float64(x))), nil
	case float64:
		return tftypes.NewValue(typ, big.NewFloat(x)), nil
	}
	return tftypes.NewValue(typ, v), nil
}

func objectOf(typ tftypes.Object, v any) (tftypes.Value, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return tftypes.Value{}, fmt.Errorf("want an object for %s, got %T", typ, v)
	}
	for k := range m {
		if _, ok := typ.AttributeTypes[k]; !ok {
			return tftypes.Value{}, fmt.Errorf("no attribute %q", k)
		}
	}
	out := map[string]tftypes.Value{}
	for k, at := range typ.AttributeTypes {
		av, err := valueOf(at, m[k])
		if err != nil {
			return tftypes.Value{}, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = av
	}
	return tftypes.NewValue(typ, out), nil
}

// jsonOf is v as Terraform's state file holds it, for
// UpgradeResourceState's raw state: objects and maps as JSON objects,
// lists as arrays, numbers as numbers, null as null.
func jsonOf(v tftypes.Value) (any, error) {
	if v.IsNull() {
		return nil, nil
	}
	typ := v.Type()
	switch {
	case typ.Is(tftypes.Object{}), typ.Is(tftypes.Map{}):
		var m map[string]tftypes.Value
		if err := v.As(&m); err != nil {
			return nil, err
		}
		return jsonOfEach(m)
	case typ.Is(tftypes.List{}), typ.Is(tftypes.Set{}):
		var l []tftypes.Value
		if err := v.As(&l); err != nil {
			return nil, err
		}
		return jsonOfList(l)
	case typ.Is(tftypes.Number):
		var f big.Float
		err := v.As(&f)
		return jsonNumber(f.Text('g', -1)), err
	}
	var out any
	var err error
	switch {
	case typ.Is(tftypes.String):
		var s string
		err, out = v.As(&s), &s
	case typ.Is(tftypes.Bool):
		var b bool
		err, out = v.As(&b), &b
	default:
		err = fmt.Errorf("no JSON for %s", typ)
	}
	return out, err
}

// jsonNumber is a number written as it is, without a float's rounding.
type jsonNumber string

func (n jsonNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }

func jsonOfEach(m map[string]tftypes.Value) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, e := range m {
		j, err := jsonOf(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = j
	}
	return out, nil
}

func jsonOfList(l []tftypes.Value) ([]any, error) {
	out := make([]any, len(l))
	for i, e := range l {
		j, err := jsonOf(e)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = j
	}
	return out, nil
}

// proposedNew is what Terraform proposes to the provider's plan (its
// objchange.ProposedNew): the configuration, with every computed
// attribute the configuration leaves null taken from the prior state, and
// nested objects (single, and map entries by key) merged the same way.
// On a create (prior null) it is the configuration.
func proposedNew(attrs []*tfprotov6.SchemaAttribute, prior, config tftypes.Value) (tftypes.Value, error) {
	if prior.IsNull() || config.IsNull() || !config.IsKnown() {
		return config, nil
	}
	var pm, cm map[string]tftypes.Value
	if err := prior.As(&pm); err != nil {
		return config, err
	}
	if err := config.As(&cm); err != nil {
		return config, err
	}
	out := make(map[string]tftypes.Value, len(cm))
	for _, a := range attrs {
		v, err := proposedAttr(a, pm[a.Name], cm[a.Name])
		if err != nil {
			return config, fmt.Errorf("%s: %w", a.Name, err)
		}
		out[a.Name] = v
	}
	return tftypes.NewValue(config.Type(), out), nil
}

func proposedAttr(a *tfprotov6.SchemaAttribute, prior, config tftypes.Value) (tftypes.Value, error) {
	switch {
	case a.Computed && config.IsNull():
		return prior, nil
	case a.NestedType == nil || config.IsNull() || prior.IsNull():
		return config, nil
	case a.NestedType.Nesting == tfprotov6.SchemaObjectNestingModeSingle:
		return proposedNew(a.NestedType.Attributes, prior, config)
	case a.NestedType.Nesting == tfprotov6.SchemaObjectNestingModeMap:
		return proposedMap(a.NestedType.Attributes, prior, config)
	}
	return config, nil
}

// proposedMap merges a map of nested objects entry by entry, by key.
func proposedMap(attrs []*tfprotov6.SchemaAttribute, prior, config tftypes.Value) (tftypes.Value, error) {
	var pm, cm map[string]tftypes.Value
	if err := prior.As(&pm); err != nil {
		return config, err
	}
	if err := config.As(&cm); err != nil {
		return config, err
	}
	out := make(map[string]tftypes.Value, len(cm))
	for k, cv := range cm {
		pv, ok := pm[k]
		if !ok {
			pv = tftypes.NewValue(cv.Type(), nil)
		}
		v, err := proposedNew(attrs, pv, cv)
		if err != nil {
			return config, fmt.Errorf("[%q]: %w", k, err)
		}
		out[k] = v
	}
	return tftypes.NewValue(config.Type(), out), nil
}

// Unknown is a value not known until apply, as a reference to an attribute
// of a resource the same apply creates: put it in a configuration.
func Unknown(typ tftypes.Type) tftypes.Value { return tftypes.NewValue(typ, tftypes.UnknownValue) }
