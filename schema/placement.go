package schema

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// Placement: where a VM's server may run, in the shapes of a pod's spec (nodeSelector,
// affinity, tolerations, priorityClassName, topologySpreadConstraints), so that what a user
// knows of pods holds for VMs (docs/placement.md).
//
// The decision checks what it can check without the cluster: the shape (no unknown keys, the
// right types), label keys and values, the enumerations, names and counts. What needs the
// cluster (a priority class that does not exist) or Kubernetes' whole pod validation is left
// to the API server, which refuses the server pod: the VM then says ServerRejected, with the
// API server's words.

// placement reads and checks the VM's placement at v, the value of f.Placement: nil when the
// VM has none (or the layout has no place for one).
func placement(path string, v gjson.Result) (*backend.Placement, field.ErrorList) {
	if path == "" || !v.Exists() || v.Type == gjson.Null {
		return nil, nil
	}
	fp := fieldPath(path)
	if !v.IsObject() {
		return nil, field.ErrorList{field.Invalid(fp, v.Raw, "must be an object (nodeSelector, affinity, tolerations, priorityClassName, topologySpreadConstraints)")}
	}
	p, err := backend.ParsePlacement([]byte(v.Raw))
	if err != nil {
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "read placement: "), "json: ")
		return nil, field.ErrorList{field.Invalid(fp, "", "not a placement: "+msg)}
	}
	errs := checkPlacement(fp, p)
	if len(errs) > 0 {
		return nil, errs
	}
	if p.Empty() {
		return nil, nil
	}
	return p, nil
}

// checkPlacement checks what can be checked of a placement without the cluster.
func checkPlacement(fp *field.Path, p *backend.Placement) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(p.NodeSelector)) {
		v := p.NodeSelector[k]
		// One error per entry, for its key and its value together.
		var why []string
		for _, msg := range validation.IsQualifiedName(k) {
			why = append(why, "not a label key: "+msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			why = append(why, fmt.Sprintf("value %q is not a label value: %s", v, msg))
		}
		if len(why) > 0 {
			errs = append(errs, field.Invalid(fp.Child("nodeSelector").Key(k), k, strings.Join(why, "; ")))
		}
	}
	if a := p.Affinity; a != nil && a.NodeAffinity != nil {
		na := a.NodeAffinity
		at := fp.Child("affinity", "nodeAffinity")
		if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			rat := at.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			if len(r.NodeSelectorTerms) == 0 {
				errs = append(errs, field.Required(rat, "at least one term: no node matches an empty list"))
			}
			for i, term := range r.NodeSelectorTerms {
				errs = append(errs, checkTerm(rat.Index(i), term, true)...)
			}
		}
		for i, pt := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			pat := at.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if pt.Weight < 1 || pt.Weight > 100 {
				errs = append(errs, field.Invalid(pat.Child("weight"), pt.Weight, "must be from 1 to 100"))
			}
			errs = append(errs, checkTerm(pat.Child("preference"), pt.Preference, false)...)
		}
	}
	for i, t := range p.Tolerations {
		errs = append(errs, checkToleration(fp.Child("tolerations").Index(i), t)...)
	}
	if n := p.PriorityClassName; n != "" {
		for _, msg := range validation.IsDNS1123Subdomain(n) {
			errs = append(errs, field.Invalid(fp.Child("priorityClassName"), n, "not a PriorityClass name: "+msg))
		}
	}
	for i, c := range p.TopologySpreadConstraints {
		at := fp.Child("topologySpreadConstraints").Index(i)
		if c.MaxSkew < 1 {
			errs = append(errs, field.Invalid(at.Child("maxSkew"), c.MaxSkew, "must be at least 1"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(at.Child("topologyKey"), "a node label key such as topology.kubernetes.io/zone"))
		}
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			errs = append(errs, field.NotSupported(at.Child("whenUnsatisfiable"), c.WhenUnsatisfiable,
				[]string{string(corev1.DoNotSchedule), string(corev1.ScheduleAnyway)}))
		}
	}
	return errs
}

// nodeOperators are the operators of a node selector requirement on labels (matchExpressions);
// fieldOperators those on a node's fields (matchFields), of which metadata.name is the only one.
var (
	nodeOperators = []string{string(corev1.NodeSelectorOpIn), string(corev1.NodeSelectorOpNotIn), string(corev1.NodeSelectorOpExists),
		string(corev1.NodeSelectorOpDoesNotExist), string(corev1.NodeSelectorOpGt), string(corev1.NodeSelectorOpLt)}
	fieldOperators = []string{string(corev1.NodeSelectorOpIn), string(corev1.NodeSelectorOpNotIn)}
	nodeFields     = []string{"metadata.name"}
)

// checkTerm checks a node selector term as the API server checks a pod's (required: a term of
// the required node affinity), so that the VM is refused with its paths rather than its
// server pod refused (ServerRejected). No more than the API server: what it lets through (a Gt
// value that is not an integer, a preferred term's values that are not label values) is a
// term the scheduler skips, and a placement with another term that matches works, so a VM
// that runs so keeps running after an upgrade; a required node affinity none of whose terms
// parses admits no node, and the room check says so.
func checkTerm(at *field.Path, term corev1.NodeSelectorTerm, required bool) field.ErrorList {
	var errs field.ErrorList
	for i, r := range term.MatchExpressions {
		errs = append(errs, checkExpression(at.Child("matchExpressions").Index(i), r, required)...)
	}
	for i, r := range term.MatchFields {
		errs = append(errs, checkField(at.Child("matchFields").Index(i), r)...)
	}
	return errs
}

// checkExpression checks a requirement on node labels: its operator, the count of values it
// takes, its key a label key and, in a required term, its values label values. One error per
// value, for every reason together.
func checkExpression(at *field.Path, r corev1.NodeSelectorRequirement, required bool) field.ErrorList {
	var errs field.ErrorList
	op := string(r.Operator)
	valued := false // whether the operator takes values, which are then checked one by one
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		valued = true
		if len(r.Values) == 0 {
			errs = append(errs, field.Required(at.Child("values"), "at least one value for "+op))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			errs = append(errs, field.Invalid(at.Child("values"), r.Values, "must be empty for "+op))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		valued = true
		if len(r.Values) != 1 {
			errs = append(errs, field.Invalid(at.Child("values"), r.Values, "must be one integer for "+op))
		}
	default:
		errs = append(errs, field.NotSupported(at.Child("operator"), op, nodeOperators))
	}
	if r.Key == "" {
		errs = append(errs, field.Required(at.Child("key"), "a node label key"))
	} else {
		for _, msg := range validation.IsQualifiedName(r.Key) {
			errs = append(errs, field.Invalid(at.Child("key"), r.Key, "not a label key: "+msg))
		}
	}
	if !valued || !required {
		return errs
	}
	for i, v := range r.Values {
		if why := validation.IsValidLabelValue(v); len(why) > 0 {
			errs = append(errs, field.Invalid(at.Child("values").Index(i), v, "not a label value: "+strings.Join(why, "; ")))
		}
	}
	return errs
}

// checkField checks a requirement on a node's fields: the API server knows only metadata.name,
// with In or NotIn and exactly one value, a node name.
func checkField(at *field.Path, r corev1.NodeSelectorRequirement) field.ErrorList {
	var errs field.ErrorList
	op := string(r.Operator)
	switch {
	case !slices.Contains(fieldOperators, op):
		errs = append(errs, field.NotSupported(at.Child("operator"), op, fieldOperators))
	case len(r.Values) == 0:
		errs = append(errs, field.Required(at.Child("values"), "exactly one value (a node name) for "+op+" on a node field"))
	case len(r.Values) > 1:
		errs = append(errs, field.Invalid(at.Child("values"), r.Values, "must be exactly one value (a node name) for "+op+" on a node field"))
	}
	switch {
	case r.Key == "":
		errs = append(errs, field.Required(at.Child("key"), "a node field: metadata.name"))
	case !slices.Contains(nodeFields, r.Key):
		errs = append(errs, field.NotSupported(at.Child("key"), r.Key, nodeFields))
	default:
		for i, v := range r.Values {
			for _, msg := range validation.IsDNS1123Subdomain(v) {
				errs = append(errs, field.Invalid(at.Child("values").Index(i), v, "not a node name: "+msg))
			}
		}
	}
	return errs
}

// checkToleration checks a toleration's operator, effect and the key and value they allow.
func checkToleration(at *field.Path, t corev1.Toleration) field.ErrorList {
	var errs field.ErrorList
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		if t.Key == "" {
			errs = append(errs, field.Invalid(at.Child("operator"), string(t.Operator), "must be Exists when key is empty (tolerate every taint)"))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(at.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(at.Child("operator"), string(t.Operator), []string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
	}
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(at.Child("key"), t.Key, "not a taint key: "+msg))
		}
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(at.Child("effect"), string(t.Effect),
			[]string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(at.Child("tolerationSeconds"), *t.TolerationSeconds, fmt.Sprintf("only for effect %s", corev1.TaintEffectNoExecute)))
	}
	return errs
}
