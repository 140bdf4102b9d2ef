package cachemeta_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/cachemeta"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// form is a cached form as the informers keep them: its keys, and Unkept for the rest.
type form struct {
	cachemeta.Unkept
	ns, name, rv string
}

func (f *form) GetNamespace() string             { return f.ns }
func (f *form) GetName() string                  { return f.name }
func (f *form) GetUID() types.UID                { return "u1" }
func (f *form) GetResourceVersion() string       { return f.rv }
func (f *form) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (f *form) DeepCopyObject() runtime.Object   { return f }

// TestReadInPlace: client-go reads a form's keys through meta.Accessor from the form itself,
// and what it does not keep reads as unset, whatever a setter was asked to do.
func TestReadInPlace(t *testing.T) {
	f := &form{ns: "ns", name: "a", rv: "7"}
	m, err := meta.Accessor(f)
	if err != nil || m != metav1.Object(f) {
		t.Fatalf("meta.Accessor: %T, %v; want the form itself", m, err)
	}
	if key, err := cache.MetaNamespaceKeyFunc(f); err != nil || key != "ns/a" {
		t.Errorf("key %q, %v", key, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = meta.Accessor(f) }); n != 0 {
		t.Errorf("meta.Accessor allocates %v times, want 0", n)
	}
	m.SetLabels(map[string]string{"a": "b"})
	m.SetFinalizers([]string{"x"})
	m.SetGeneration(3)
	if m.GetLabels() != nil || m.GetFinalizers() != nil || m.GetGeneration() != 0 || m.GetDeletionTimestamp() != nil ||
		m.GetOwnerReferences() != nil || m.GetManagedFields() != nil || m.GetAnnotations() != nil {
		t.Errorf("what the form does not keep reads as set: %v %v %v", m.GetLabels(), m.GetFinalizers(), m.GetGeneration())
	}
}
