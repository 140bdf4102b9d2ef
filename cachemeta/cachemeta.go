// Package cachemeta lets the informers' cached forms, which keep only an object's keys, be read
// by client-go as object metadata without making a metav1.ObjectMeta on each read.
//
// Why: client-go reads an object's metadata through meta.Accessor at every step of an
// informer (the store's key, the namespace index, the resourceVersion of each event). A form
// that offers only GetObjectMeta makes a new metav1.ObjectMeta each time, and in a cold start
// over many VMs those copies were a large share of what the controller allocated before its
// caches synced (docs/dev/benchmarks.md, "cached forms").
// A form that is a metav1.Object itself is read in place. It embeds Unkept for the methods
// of what it does not keep and defines the getters of what it does.
package cachemeta

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Unkept is the metadata a cached form does not keep: each getter returns the zero value,
// and each setter does nothing, since a cached form is immutable once made (client-go's
// informers never set metadata on what they store). It has no fields, so embedding it as the
// first field costs a form nothing (a zero-size last field would be padded). A form embeds it
// and defines GetNamespace, GetName, GetUID and GetResourceVersion, and whatever else it keeps.
type Unkept struct{}

var _ metav1.Object = Unkept{}

func (Unkept) GetNamespace() string                                       { return "" }
func (Unkept) SetNamespace(string)                                        {}
func (Unkept) GetName() string                                            { return "" }
func (Unkept) SetName(string)                                             {}
func (Unkept) GetGenerateName() string                                    { return "" }
func (Unkept) SetGenerateName(string)                                     {}
func (Unkept) GetUID() types.UID                                          { return "" }
func (Unkept) SetUID(types.UID)                                           {}
func (Unkept) GetResourceVersion() string                                 { return "" }
func (Unkept) SetResourceVersion(string)                                  {}
func (Unkept) GetGeneration() int64                                       { return 0 }
func (Unkept) SetGeneration(int64)                                        {}
func (Unkept) GetSelfLink() string                                        { return "" }
func (Unkept) SetSelfLink(string)                                         {}
func (Unkept) GetCreationTimestamp() metav1.Time                          { return metav1.Time{} }
func (Unkept) SetCreationTimestamp(metav1.Time)                           {}
func (Unkept) GetDeletionTimestamp() *metav1.Time                         { return nil }
func (Unkept) SetDeletionTimestamp(*metav1.Time)                          {}
func (Unkept) GetDeletionGracePeriodSeconds() *int64                      { return nil }
func (Unkept) SetDeletionGracePeriodSeconds(*int64)                       {}
func (Unkept) GetLabels() map[string]string                               { return nil }
func (Unkept) SetLabels(map[string]string)                                {}
func (Unkept) GetAnnotations() map[string]string                          { return nil }
func (Unkept) SetAnnotations(map[string]string)                           {}
func (Unkept) GetFinalizers() []string                                    { return nil }
func (Unkept) SetFinalizers([]string)                                     {}
func (Unkept) GetOwnerReferences() []metav1.OwnerReference                { return nil }
func (Unkept) SetOwnerReferences([]metav1.OwnerReference)                 {}
func (Unkept) GetManagedFields() []metav1.ManagedFieldsEntry              { return nil }
func (Unkept) SetManagedFields(managedFields []metav1.ManagedFieldsEntry) {}
