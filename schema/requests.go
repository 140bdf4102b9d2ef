package schema

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// RequestAnnotations are the annotations by which a user (or `kubectl vm`) asks the controller
// for something: a restart, a start, a stop, a migration, a pause or its end. A change of one
// is work a user asked for, as a change of the spec is: the loop hands it out ahead of the
// backlog (reconcile/urgency.go). An annotation the controller acts on goes here;
// TestRequestAnnotations fails on an Annotation constant of this package that is neither here
// nor named as something else.
var RequestAnnotations = []string{
	AnnotationRestartedAt,
	AnnotationStartRequestedAt,
	AnnotationStopRequestedAt,
	AnnotationMigrateRequestedAt,
	AnnotationPaused,
}

// requestAnnotationKeys are the gjson paths of RequestAnnotations below metadata.annotations.
var requestAnnotationKeys = func() []string {
	keys := make([]string, len(RequestAnnotations))
	for i, a := range RequestAnnotations {
		keys[i] = escapeGJSON(a)
	}
	return keys
}()

// SameRequests reports whether vm and other carry the same value (or none) of every request
// annotation (RequestAnnotations), whatever the layout records of them. It reads without
// copying what it compares: the VM cache's update handler asks it of every update.
func (vm VirtualMachine) SameRequests(other VirtualMachine) bool {
	a := gjson.Get(unsafe.String(unsafe.SliceData(vm.raw), len(vm.raw)), "metadata.annotations")
	b := gjson.Get(unsafe.String(unsafe.SliceData(other.raw), len(other.raw)), "metadata.annotations")
	if !a.Exists() && !b.Exists() {
		return true
	}
	for _, k := range requestAnnotationKeys {
		if a.Get(k).Str != b.Get(k).Str {
			return false
		}
	}
	return true
}
