package reconcile

import (
	"bytes"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// Object is a VM as the controller's informer caches it: the object's JSON, cut down to what
// a view reads, plus the few metadata fields the informer itself needs (namespace and name
// for its keys, resourceVersion for its update checks, UID for tombstones), which it reads
// through GetObjectMeta.
//
// Why not unstructured.Unstructured: a decoded tree of maps costs several times the bytes of
// its JSON, and every reconcile had to serialise it again for the gjson view. An Object is
// kept as bytes once, when the informer stores it, and a view reads those bytes in place.
//
// An Object is immutable once made, so it is shared, never copied: DeepCopyObject returns it.
type Object struct {
	namespace, name, resourceVersion string
	uid                              types.UID
	raw                              []byte
	// initialEventsEnd marks the bookmark that ends a watch list's initial events; the
	// reflector reads it as an annotation (see GetObjectMeta). Only bookmarks carry it.
	initialEventsEnd bool
}

var (
	_ runtime.Object            = (*Object)(nil)
	_ metav1.ObjectMetaAccessor = (*Object)(nil)
)

// keptMetadata is what a view reads of metadata, with the one annotation it reads
// (schema.AnnotationRestartedAt). Everything else there (labels, other annotations such as
// kubectl's last-applied copy of the object, managedFields, owner references) is dropped, and
// so is resourceVersion, which Object keeps apart (see Same).
var keptMetadata = []string{"name", "namespace", "uid", "generation", "deletionTimestamp", "finalizers"}

// Compact makes the cached form of an object the informer has just decoded. u is read, not
// changed.
func Compact(u *unstructured.Unstructured) (*Object, error) {
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
			if v, ok := ann[schema.AnnotationRestartedAt]; ok {
				kept["annotations"] = map[string]any{schema.AnnotationRestartedAt: v}
			}
		}
		top["metadata"] = kept
	}
	raw, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("encode %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &Object{namespace: u.GetNamespace(), name: u.GetName(), uid: u.GetUID(), resourceVersion: u.GetResourceVersion(), raw: raw}, nil
}

// View is a view of the cached object; it shares the object's bytes, which nobody changes.
func (o *Object) View(f schema.Fields) schema.VirtualMachine {
	return schema.ViewOf(o.raw, o.resourceVersion, f)
}

// GetObjectMeta is how client-go (meta.Accessor) reads the object's keys and version. The
// ObjectMeta is made on each call rather than kept: it would be most of an Object's own
// bytes, for four strings.
func (o *Object) GetObjectMeta() metav1.Object {
	m := &metav1.ObjectMeta{Namespace: o.namespace, Name: o.name, UID: o.uid, ResourceVersion: o.resourceVersion}
	if o.initialEventsEnd {
		m.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return m
}

// GetNamespace, GetName, GetUID and GetResourceVersion read the object's metadata.
func (o *Object) GetNamespace() string { return o.namespace }

// GetName is the object's name.
func (o *Object) GetName() string { return o.name }

// GetUID is the object's UID.
func (o *Object) GetUID() types.UID { return o.uid }

// GetResourceVersion is the object's resourceVersion.
func (o *Object) GetResourceVersion() string { return o.resourceVersion }

// Same reports whether two versions of a cached object differ in nothing a view reads: a
// resync, or a change of labels or of annotations other than the restart request.
func Same(a, b *Object) bool { return bytes.Equal(a.raw, b.raw) }

// Size is the number of bytes of JSON the object keeps.
func (o *Object) Size() int { return len(o.raw) }

// GetObjectKind has nothing to tell: apiVersion and kind are in the JSON, read by the view.
func (o *Object) GetObjectKind() k8sschema.ObjectKind { return k8sschema.EmptyObjectKind }

// DeepCopyObject returns o itself: an Object is never modified after Compact.
func (o *Object) DeepCopyObject() runtime.Object { return o }
