package vmcache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/cachemeta"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Object is a VM as the controller's informer caches it: the object's JSON, cut down to what
// a view reads and packed (see pack.go), its phase and reason, and the few metadata fields the
// informer itself needs (namespace and name for its keys, resourceVersion for its update
// checks, UID for tombstones), which it reads in place: an Object is a metav1.Object
// (cachemeta).
//
// Why not unstructured.Unstructured: a decoded tree of maps costs several times the bytes of
// its JSON, and every reconcile had to serialise it again for the gjson view. An Object is
// kept as bytes once, when the informer stores it, and a view reads them once unpacked.
//
// An Object is immutable once made, so it is shared, never copied: DeepCopyObject returns it.
type Object struct {
	cachemeta.Unkept
	// namespace is interned: every VM of a namespace shares one copy of its name.
	namespace             unique.Handle[string]
	name, resourceVersion string
	uid                   types.UID
	packed                []byte
	// phase is status.phase in the layout the object was compacted in, read once here so
	// that counting VMs by phase does not unpack every VM at each scrape.
	phase schema.Phase
	// reason is status.reason, read once here for the same reason (the gauge of VMs by
	// reason), and interned: the VMs of a reason share one copy of it.
	reason unique.Handle[string]
	// settled is schema.VirtualMachine.Settled, read once here for the same reason: the loop
	// asks it of every VM of its first list.
	settled bool
	// initialEventsEnd marks the bookmark that ends a watch list's initial events; the
	// reflector reads it as an annotation (see GetAnnotations). Only bookmarks carry it.
	initialEventsEnd bool
}

var (
	_ runtime.Object = (*Object)(nil)
	_ metav1.Object  = (*Object)(nil)
)

// keptMetadata is what a view reads of metadata, with the annotations it reads
// (keptAnnotations). Everything else there (labels, other annotations such as kubectl's
// last-applied copy of the object, managedFields, owner references) is dropped, and so is
// resourceVersion, which Object keeps apart (see Same).
var keptMetadata = []string{"name", "namespace", "uid", "generation", "deletionTimestamp", "finalizers"}

// keptAnnotations are the annotations a view reads: the restart request and the pause, the
// start and stop requests with the stop's grace period, and the migration request.
var keptAnnotations = [...]string{schema.AnnotationRestartedAt, schema.AnnotationPaused,
	schema.AnnotationStartRequestedAt, schema.AnnotationStopRequestedAt, schema.AnnotationStopGracePeriod,
	schema.AnnotationMigrateRequestedAt}

// Compact makes the cached form, in layout f, of an object the informer has just decoded. u
// is read, not changed.
func Compact(u *unstructured.Unstructured, f schema.Fields) (*Object, error) {
	raw, err := CompactJSON(u)
	if err != nil {
		return nil, err
	}
	var scratch []byte
	return &Object{namespace: unique.Make(u.GetNamespace()), name: u.GetName(), uid: u.GetUID(), resourceVersion: u.GetResourceVersion(),
		packed: pack(&scratch, raw), phase: phaseOf(raw, f), reason: reasonOf(raw, f), settled: schema.ViewOf(raw, "", f).Settled()}, nil
}

// Transform is the transform of a dynamic informer of VMs in layout f: it keeps each VM as an
// Object, the JSON of what a view reads, instead of a tree of maps (see Object for why).
// Tombstones pass through. The loop's informer takes it when it has no REST client to read
// VMs off the wire with (ListerWatcher), as in the unit tests over client-go's dynamic fake.
func Transform(f schema.Fields) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		return Compact(u, f)
	}
}

// CompactJSON is the JSON of u that a view reads (see keptMetadata): what Compact packs, and
// what the loop reads of the dynamic client's answer to a write.
func CompactJSON(u *unstructured.Unstructured) ([]byte, error) {
	top := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "metadata" {
			top[k] = v
		}
	}
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		kept := make(map[string]any, len(keptMetadata))
		for _, k := range keptMetadata {
			if v, ok := md[k]; ok {
				kept[k] = v
			}
		}
		if ann, ok := md["annotations"].(map[string]any); ok {
			keptAnn := map[string]any{}
			for _, k := range keptAnnotations {
				if v, ok := ann[k]; ok {
					keptAnn[k] = v
				}
			}
			if len(keptAnn) > 0 {
				kept["annotations"] = keptAnn
			}
		}
		top["metadata"] = kept
	}
	raw, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("encode %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return raw, nil
}

// knownPhases are the phases this project writes.
var knownPhases = []schema.Phase{schema.PhaseCreating, schema.PhaseActive, schema.PhaseInactive,
	schema.PhaseFailed, schema.PhaseTerminating, schema.PhaseUnknown}

// phaseOf reads the phase of raw in layout f. A phase this project writes is the shared
// constant; another value (written by someone else) is copied out of raw, which the caller
// reuses.
func phaseOf(raw []byte, f schema.Fields) schema.Phase {
	p := schema.ViewOf(raw, "", f).Phase()
	if i := slices.Index(knownPhases, p); i >= 0 {
		return knownPhases[i]
	}
	return schema.Phase(strings.Clone(string(p)))
}

// reasonOf reads the reason of raw in layout f, interned (unique.Make copies it out of raw,
// which the caller reuses).
func reasonOf(raw []byte, f schema.Fields) unique.Handle[string] {
	return unique.Make(schema.ViewOf(raw, "", f).Reason())
}

// View is a view of the cached object, in layout f; it unpacks the object's JSON into a
// slice of its own.
func (o *Object) View(f schema.Fields) (schema.VirtualMachine, error) {
	raw, err := o.JSON()
	if err != nil {
		return schema.VirtualMachine{}, fmt.Errorf("%s/%s: %w", o.GetNamespace(), o.name, err)
	}
	return schema.ViewOf(raw, o.resourceVersion, f), nil
}

// JSON is the object's compact JSON, unpacked into a slice of its own.
func (o *Object) JSON() ([]byte, error) { return unpack(o.packed) }

// Phase is the VM's status.phase, in the layout the object was compacted in.
func (o *Object) Phase() schema.Phase { return o.phase }

// Reason is the VM's status.reason, in the layout the object was compacted in; "" for none.
func (o *Object) Reason() string {
	if o.reason == (unique.Handle[string]{}) { // a bookmark, or the informer's example object
		return ""
	}
	return o.reason.Value()
}

// Settled is schema.VirtualMachine.Settled of the object, in the layout it was compacted in.
func (o *Object) Settled() bool { return o.settled }

// GetAnnotations is nil but for the bookmark that ends a watch list's initial events, which
// the reflector knows by its annotation.
func (o *Object) GetAnnotations() map[string]string {
	if o.initialEventsEnd {
		return map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return nil
}

// GetNamespace, GetName, GetUID and GetResourceVersion read the object's metadata.
func (o *Object) GetNamespace() string {
	if o.namespace == (unique.Handle[string]{}) { // a bookmark, or the informer's example object
		return ""
	}
	return o.namespace.Value()
}

// GetName is the object's name.
func (o *Object) GetName() string { return o.name }

// GetUID is the object's UID.
func (o *Object) GetUID() types.UID { return o.uid }

// GetResourceVersion is the object's resourceVersion.
func (o *Object) GetResourceVersion() string { return o.resourceVersion }

// Same reports whether two versions of a cached object differ in nothing a view reads: a
// resync, or a change of labels or of annotations other than those kept (keptAnnotations). Equal
// JSON packs to equal bytes (one dictionary, one encoder), so the packed bytes are compared.
func Same(a, b *Object) bool { return bytes.Equal(a.packed, b.packed) }

// Size is the number of bytes the object keeps of its JSON, packed.
func (o *Object) Size() int { return len(o.packed) }

// GetObjectKind has nothing to tell: apiVersion and kind are in the JSON, read by the view.
func (o *Object) GetObjectKind() k8sschema.ObjectKind { return k8sschema.EmptyObjectKind }

// DeepCopyObject returns o itself: an Object is never modified after Compact.
func (o *Object) DeepCopyObject() runtime.Object { return o }
