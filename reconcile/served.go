package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/crds"
)

// servedWatch follows the CustomResourceDefinition of the VM resource and reports whether the
// watched version is served: the CRD exists and crds.Served says so (the version is listed as
// served and the CRD is Established). A CRD being deleted still serves its objects (their
// finalizers must still be released), so it counts as served until it is gone.
type servedWatch struct {
	client   dynamic.Interface
	gvr      k8sschema.GroupVersionResource
	log      *slog.Logger
	onChange func(ctx context.Context, served bool)

	// handled, if set, is called after each CRD event has been handled (after onChange, if
	// the event changed anything), with the reason it is not served ("" when it is): the
	// point up to which a test knows the watch has caught up.
	handled func(why string)

	mu    sync.Mutex
	state bool // guarded by mu; true at start: the checks before start found it served
}

func newServedWatch(client dynamic.Interface, gvr k8sschema.GroupVersionResource, log *slog.Logger, onChange func(context.Context, bool)) *servedWatch {
	return &servedWatch{client: client, gvr: gvr, log: log, onChange: onChange, state: true}
}

func (w *servedWatch) served() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// start watches the one CRD by name (so RBAC can name it too) until ctx ends.
func (w *servedWatch) start(ctx context.Context) error {
	name := crds.Name(w.gvr)
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(w.client, 0, "", func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + name
	})
	inf := f.ForResource(crds.GVR).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.set(ctx, servedBy(obj, w.gvr.Version)) },
		UpdateFunc: func(_, obj any) { w.set(ctx, servedBy(obj, w.gvr.Version)) },
		DeleteFunc: func(any) { w.set(ctx, "CRD "+name+" was deleted") },
	}); err != nil {
		return fmt.Errorf("watch the CRD %s: %w", name, err)
	}
	go inf.RunWithContext(ctx)
	return nil
}

// set records a new state: why is empty when the resource is served, else why not.
func (w *servedWatch) set(ctx context.Context, why string) {
	if w.handled != nil {
		defer w.handled(why)
	}
	served := why == ""
	w.mu.Lock()
	changed := served != w.state
	w.state = served
	w.mu.Unlock()
	if !changed {
		return
	}
	if served {
		w.log.Info("The VM resource is served again; resuming", "resource", w.gvr.String())
	} else {
		w.log.Warn("The VM resource is not served; waiting for it", "resource", w.gvr.String(), "reason", why)
	}
	w.onChange(ctx, served)
}

// servedBy says why a CRD does not serve version, or "" when it does.
func servedBy(obj any, version string) string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Sprintf("the CRD cannot be read (a %T)", obj)
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return fmt.Sprintf("the CRD cannot be read: %v", err)
	}
	if err := crds.Served(data, version); err != nil {
		return err.Error()
	}
	return ""
}
