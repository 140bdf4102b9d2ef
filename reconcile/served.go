package reconcile

import (
	"context"
	"encoding/json"
	"errors"
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
//
// With a layout (CRD.Layout: the field map was chosen from the CRD's schema at start-up),
// it also chooses the layout again from every version of the CRD it sees served, and when the
// choice differs it calls onLayout once and ignores every later event: the controller is
// stopping, and must not resume on fields the CRD no longer gives.
type servedWatch struct {
	client   dynamic.Interface
	gvr      k8sschema.GroupVersionResource
	log      *slog.Logger
	onChange func(ctx context.Context, served bool)

	// layout, if set, is the layout the controller runs with, chosen from the CRD's schema;
	// onLayout is called, from the watch's goroutine and before any later event is handled,
	// when the CRD no longer gives it.
	layout   *crds.Layout
	onLayout func(changed *crds.LayoutChanged)

	// handled, if set, is called after each CRD event has been handled (after onChange or
	// onLayout, if the event changed anything), with the reason it is not served ("" when it
	// is; once the CRD no longer gives layout, the *crds.LayoutChanged's message): the point
	// up to which a test knows the watch has caught up.
	handled func(why string)

	mu    sync.Mutex
	state bool // guarded by mu; true at start: the checks before start found it served
	// changed, guarded by mu, is set once the CRD no longer gives layout.
	changed *crds.LayoutChanged
	// judged, guarded by mu and set by start, says whether the watch has handled the CRD of
	// its first list; nil before start.
	judged func() bool
}

func newServedWatch(client dynamic.Interface, gvr k8sschema.GroupVersionResource, log *slog.Logger, onChange func(context.Context, bool)) *servedWatch {
	return &servedWatch{client: client, gvr: gvr, log: log, onChange: onChange, state: true}
}

// served reports whether the resource is served. With a layout to hold, it is not until the
// watch has judged the CRD of its first list (so that workers, which wait for it through
// HasSynced, start on nothing the CRD changed between the start-up checks and the watch), nor
// ever again once the CRD no longer gives the layout.
func (w *servedWatch) served() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.layout != nil && (w.changed != nil || w.judged == nil || !w.judged()) {
		return false
	}
	return w.state
}

// start watches the one CRD by name (so RBAC can name it too) until ctx ends.
func (w *servedWatch) start(ctx context.Context) error {
	name := crds.Name(w.gvr)
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(w.client, 0, "", func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + name
	})
	inf := f.ForResource(crds.GVR).Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.update(ctx, obj) },
		UpdateFunc: func(_, obj any) { w.update(ctx, obj) },
		DeleteFunc: func(any) { w.event(ctx, "CRD "+name+" was deleted", nil) },
	})
	if err != nil {
		return fmt.Errorf("watch the CRD %s: %w", name, err)
	}
	w.mu.Lock()
	w.judged = reg.HasSynced // true once the handler has had every CRD of the first list
	w.mu.Unlock()
	go inf.RunWithContext(ctx)
	return nil
}

// update handles the CRD as it now is: whether it serves the version, and, when it does and
// there is a layout to hold, whether its schema still gives that layout. A version that is
// not served is not judged on its layout: nothing is decided while it is not, and it is
// judged when it is served again, before the informer of the VMs starts again.
func (w *servedWatch) update(ctx context.Context, obj any) {
	why := servedBy(obj, w.gvr.Version)
	var changed *crds.LayoutChanged
	if why == "" && w.layout != nil {
		changed = layoutChangedBy(obj, *w.layout, w.gvr.Version)
	}
	w.event(ctx, why, changed)
}

// event records what an event of the CRD says: why the resource is not served ("" when it
// is), and whether the CRD no longer gives the layout. Once it has not, nothing more is
// recorded: the controller is stopping.
func (w *servedWatch) event(ctx context.Context, why string, changed *crds.LayoutChanged) {
	w.mu.Lock()
	stopping := w.changed
	if stopping == nil {
		w.changed = changed
	}
	w.mu.Unlock()
	switch {
	case stopping != nil:
		if w.handled != nil {
			w.handled(stopping.Error())
		}
	case changed != nil:
		w.onLayout(changed)
		if w.handled != nil {
			w.handled(changed.Error())
		}
	default:
		w.set(ctx, why)
	}
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

// layoutChangedBy chooses the layout again from a CRD the watch saw: nil when it gives l still,
// else how it changed. A CRD that cannot be read was judged by servedBy, which says so.
func layoutChangedBy(obj any, l crds.Layout, version string) *crds.LayoutChanged {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil
	}
	var changed *crds.LayoutChanged
	if errors.As(l.Rechoose(data, version), &changed) {
		return changed
	}
	return nil
}

// onLayoutChanged stops the controller's work on a layout the CRD no longer gives: the
// informer of the VMs stops first, so that no reconcile that starts from now on reads a VM
// with the old fields (reconcile finds no informer and decides nothing, as when the resource
// is not served, and the usage poller finds no VM), and only then is the process told to stop
// (CRD.OnLayoutChanged), the workers with it. Deciding on would be deciding wrong: a VM of
// the new schema whose disk the user keeps (rootDiskReclaimPolicy: Retain) is read without
// its policy, and deleted, its disk would go with it. A reconcile already in flight ends as
// decided; its VM was read before the change was seen.
func (c *Controller) onLayoutChanged(changed *crds.LayoutChanged) {
	c.stopVMs()
	c.log.Error("The CRD's schema no longer gives the field map in use; stopping so that a restart chooses again",
		"crd", changed.CRD, "version", changed.Version, "running", changed.Was.Why, "now", changed.Now)
	if c.cfg.CRD.OnLayoutChanged != nil {
		c.cfg.CRD.OnLayoutChanged(changed)
	}
}
