package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Namespaces says which namespaces are being deleted (Config.Namespaces).
//
// Why the loop asks: a namespace's deletion takes its pods before its VMs. Each VM then saw
// its server go, wrote a status saying it was replacing it, asked the API server for a new
// one (refused: the namespace is terminating) and recorded a Warning, only to be deleted a
// moment later; in a namespace deleted with many VMs in it, that was three requests per VM
// that no one would ever read, queued ahead of the finalizer removals that let the namespace
// go. In a namespace being deleted, the loop leaves a VM alone until its own deletion, then
// only releases it (see reconcile).
type Namespaces interface {
	// Start starts following the namespaces; synced reports when the first list is in.
	Start(ctx context.Context) (synced func() bool, err error)
	// Terminating reports whether namespace is known to be being deleted.
	Terminating(namespace string) bool
}

// NamespaceWatch is Namespaces over an informer of the namespaces, each cut down to its
// name and whether it is being deleted.
type NamespaceWatch struct {
	informer cache.SharedIndexInformer
	log      *slog.Logger
	// blind is set when the API server refuses the list (the namespaces rule withdrawn
	// after run's check of access passed): the watch then counts as synced and knows no
	// namespace as terminating, which is how the controller behaved without it, instead of
	// holding the controller's start for ever.
	blind atomic.Bool
}

// NewNamespaceWatch follows the namespaces through client: only the one named when the
// controller watches one namespace (a field selector on its name), else all of them.
func NewNamespaceWatch(client kubernetes.Interface, only string, log *slog.Logger) *NamespaceWatch {
	tweak := func(*metav1.ListOptions) {}
	if only != "" {
		tweak = func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", only).String()
		}
	}
	return &NamespaceWatch{
		informer: coreinformers.NewFilteredNamespaceInformer(client, 0, cache.Indexers{}, tweak),
		log:      log,
	}
}

// Start runs the informer until ctx is done.
func (w *NamespaceWatch) Start(ctx context.Context) (func() bool, error) {
	if err := w.informer.SetTransform(toNamespace); err != nil {
		return nil, fmt.Errorf("watch namespaces: %w", err)
	}
	err := w.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			if !w.blind.Swap(true) {
				w.log.Warn("Cannot list namespaces: VMs in a namespace being deleted get the work of live ones; grant the namespaces rule of `vm-controller manifests`", "error", err)
			}
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	if err != nil {
		return nil, fmt.Errorf("watch namespaces: %w", err)
	}
	go w.informer.RunWithContext(ctx)
	return func() bool { return w.blind.Load() || w.informer.HasSynced() }, nil
}

// Terminating reports whether the cache shows namespace being deleted.
func (w *NamespaceWatch) Terminating(namespace string) bool {
	obj, ok, err := w.informer.GetIndexer().GetByKey(namespace)
	if err != nil || !ok {
		return false
	}
	ns, ok := obj.(*corev1.Namespace)
	return ok && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating)
}

// toNamespace keeps only what Terminating reads, and what the informer needs. Tombstones pass
// through.
func toNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, DeletionTimestamp: ns.DeletionTimestamp},
		Status:     corev1.NamespaceStatus{Phase: ns.Status.Phase},
	}, nil
}
