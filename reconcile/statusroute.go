package reconcile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// A CRD version with the /status subresource takes the controller's status writes there,
// and they leave metadata.generation alone. A version without one (the original tutorial's
// CRD had none) takes them through the main resource, where the API server counts every
// change outside metadata as a new generation, status included. Written as on the
// subresource, each status write would leave status.observedGeneration one behind the
// generation it made; the next decision would write it again, and so on for ever (the hot
// loop metacontroller had on such CRDs).
//
// So on such a CRD a write that makes a generation claims it: every observedGeneration that
// says "current" (equal to the generation decided on), the status's own and its
// conditions', says the generation the write makes instead. That is exact because every such
// write is conditional on the resourceVersion decided on: nothing can come between the
// decision and the write, so the only change the new generation counts is the write itself.
// A user then sees observedGeneration equal to generation once the controller has caught up,
// as on a CRD with the subresource.

// statusRoute says where status writes go.
type statusRoute struct {
	// main: the CRD version has no /status subresource, so status is written through the
	// main resource, and each write that changes anything makes a generation.
	main bool
}

// statusSubresource is the subresource argument of a write to /status.
var statusSubresource = []string{"status"}

// subresources is the subresource argument of a status write's Patch: none for the main
// resource.
func (r statusRoute) subresources() []string {
	if r.main {
		return nil
	}
	return statusSubresource
}

// statusPatch renders the status st that a decision on vm made, conditional on
// resourceVersion rv. Through the main resource it claims the generation the write makes,
// unless the write would change nothing: such a write makes no generation, so claiming one
// would leave observedGeneration ahead of generation, and every later decision would find
// the status changed and write the same bytes again. That happens only when something else
// wrote an observedGeneration ahead of the generation; the unclaimed write corrects it, and
// the next decision claims as usual.
func (r statusRoute) statusPatch(f schema.Fields, vm schema.VirtualMachine, st schema.Status, rv string) ([]byte, error) {
	patch, err := schema.StatusPatch(f, st, rv)
	if err != nil || !r.main {
		return patch, err
	}
	gen := vm.Generation()
	claimed, err := schema.StatusPatch(f, claimGeneration(st, gen), rv)
	if err != nil {
		return nil, err
	}
	unchanged, err := schema.StatusPatch(f, vm.Status(), rv)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(claimed, unchanged) {
		return patch, nil
	}
	return claimed, nil
}

// usagePatch renders a usage report for the VM vm whose status is st. On the subresource it is
// schema.UsagePatch's. Through the main resource the write makes a generation whenever it
// changes anything, so it claims it as a status write does; and it is always conditional on
// the resourceVersion sampled (UsagePatch adds it to a patch that replaces the conditions,
// which this one always does), since without that a spec edit made meanwhile would be
// claimed as observed.
func (r statusRoute) usagePatch(f schema.Fields, vm schema.VirtualMachine, st schema.Status, upd decision.UsageUpdate) ([]byte, error) {
	if !r.main {
		return schema.UsagePatch(f, upd.Usage, upd.Conditions, vm.ResourceVersion())
	}
	gen := vm.Generation()
	conds := upd.Conditions
	if conds == nil {
		conds = st.Conditions
	}
	conds = claimConditions(conds, gen)
	if conds == nil {
		conds = []schema.Condition{}
	}
	patch, err := schema.UsagePatch(f, upd.Usage, conds, vm.ResourceVersion())
	if err != nil || st.ObservedGeneration != gen || f.ObservedGeneration == "" {
		return patch, err
	}
	// The report leaves the status's observedGeneration out; it claims the generation too.
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("read usage patch: %w", err)
	}
	if err := unstructured.SetNestedField(m, gen+1, strings.Split(f.ObservedGeneration, ".")...); err != nil {
		return nil, fmt.Errorf("claim generation in usage patch: %w", err)
	}
	return json.Marshal(m)
}

// claimGeneration returns st with every observedGeneration that is gen (the status's own and
// its conditions') set to gen+1, the generation a write through the main resource makes.
func claimGeneration(st schema.Status, gen int64) schema.Status {
	if st.ObservedGeneration == gen {
		st.ObservedGeneration = gen + 1
	}
	st.Conditions = claimConditions(st.Conditions, gen)
	return st
}

// claimConditions returns a copy of conds in which the conditions observed at gen are
// observed at gen+1; older ones keep their generation, as they were not current either.
func claimConditions(conds []schema.Condition, gen int64) []schema.Condition {
	if conds == nil {
		return nil
	}
	out := make([]schema.Condition, len(conds))
	for i, c := range conds {
		if c.ObservedGeneration == gen {
			c.ObservedGeneration = gen + 1
		}
		out[i] = c
	}
	return out
}
