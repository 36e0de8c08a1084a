// The MiniCluster CRD's CEL rules as the apiserver runs them (apiextensions-apiserver's own
// validator, the version the test cluster's apiserver is built from), on one MiniCluster as
// stored (its defaults applied): per status write (an update whose spec is unchanged: every
// rule runs, the `oldSelf` one included; the spec's immutability is an admission policy on
// the main resource since issue 36, crds/minicluster-immutable.yaml) and per create, for the CRD as it is and with its
// rules or defaults changed, so a change to them is measured before it is made. `make
// bench-cel` runs it (docs/benchmarks.md, issue 36).
package cel

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// variant edits the v1 schema before it is compiled.
type variant func(s *apiextensionsv1.JSONSchemaProps)

func walk(s *apiextensionsv1.JSONSchemaProps, f func(*apiextensionsv1.JSONSchemaProps)) {
	if s == nil {
		return
	}
	f(s)
	for k, p := range s.Properties {
		walk(&p, f)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		walk(s.Items.Schema, f)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walk(s.AdditionalProperties.Schema, f)
	}
}

func zeroDefaults(s *apiextensionsv1.JSONSchemaProps) {
	walk(s, func(n *apiextensionsv1.JSONSchemaProps) {
		if n.Default == nil {
			return
		}
		var v interface{}
		_ = json.Unmarshal(n.Default.Raw, &v)
		switch d := v.(type) {
		case bool:
			if !d {
				n.Default = nil
			}
		case map[string]interface{}:
			if len(d) == 0 {
				n.Default = nil
			}
		}
	})
}

func noTransition(s *apiextensionsv1.JSONSchemaProps) {
	walk(s, func(n *apiextensionsv1.JSONSchemaProps) {
		var keep apiextensionsv1.ValidationRules
		for _, r := range n.XValidations {
			if !contains(r.Rule, "oldSelf") {
				keep = append(keep, r)
			}
		}
		n.XValidations = keep
	})
}

func noRules(s *apiextensionsv1.JSONSchemaProps) {
	walk(s, func(n *apiextensionsv1.JSONSchemaProps) { n.XValidations = nil })
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func setup(b *testing.B, edit variant) (*cel.Validator, *structuralschema.Structural, map[string]interface{}, map[string]interface{}) {
	raw, err := os.ReadFile(os.Getenv("CRD"))
	if err != nil {
		b.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		b.Fatal(err)
	}
	v1 := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	if edit != nil {
		edit(v1)
	}
	var internal apiextensionsinternal.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, &internal, nil); err != nil {
		b.Fatal(err)
	}
	ss, err := structuralschema.NewStructural(&internal)
	if err != nil {
		b.Fatal(err)
	}
	mcRaw, err := os.ReadFile(os.Getenv("MC"))
	if err != nil {
		b.Fatal(err)
	}
	var obj map[string]interface{}
	if err := yaml.Unmarshal(mcRaw, &obj); err != nil {
		b.Fatal(err)
	}
	obj = ints(obj).(map[string]interface{})
	structuraldefaulting.Default(obj, ss)
	obj = ints(obj).(map[string]interface{})
	old := deepCopy(obj)
	obj["status"] = map[string]interface{}{"phase": "Running", "size": int64(2)}
	v := cel.NewValidator(ss, true, celconfig.PerCallLimit)
	return v, ss, obj, old
}

func deepCopy(m map[string]interface{}) map[string]interface{} {
	b, _ := json.Marshal(m)
	var out map[string]interface{}
	_ = json.Unmarshal(b, &out)
	return ints(out).(map[string]interface{})
}

// ints turns the integral float64s JSON decoding gives into int64s, as the apiserver holds them.
func ints(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, x := range t {
			t[k] = ints(x)
		}
		return t
	case []interface{}:
		for i, x := range t {
			t[i] = ints(x)
		}
		return t
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
	}
	return v
}

func run(b *testing.B, edit variant, update bool) {
	v, ss, obj, old := setup(b, edit)
	ctx := context.Background()
	var oldObj interface{}
	if update {
		oldObj = old
	}
	errs, _ := v.Validate(ctx, field.NewPath(""), ss, obj, oldObj, celconfig.RuntimeCELCostBudget)
	if len(errs) > 0 {
		b.Fatalf("errors: %v", errs)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v.Validate(ctx, field.NewPath(""), ss, obj, oldObj, celconfig.RuntimeCELCostBudget)
	}
}

// The CRD as it is.
func BenchmarkUpdateAsIs(b *testing.B) { run(b, nil, true) }

// Without the zero-value defaults (`false`, `{}`): fewer stored keys to compare.
func BenchmarkUpdateZeroDefaults(b *testing.B) { run(b, zeroDefaults, true) }

// Without any rule that reads `oldSelf`.
func BenchmarkUpdateNoTransition(b *testing.B) { run(b, noTransition, true) }

// Without any rule: the validator's own floor.
func BenchmarkUpdateNoRules(b *testing.B) { run(b, noRules, true) }

func BenchmarkCreateAsIs(b *testing.B)         { run(b, nil, false) }
func BenchmarkCreateZeroDefaults(b *testing.B) { run(b, zeroDefaults, false) }
