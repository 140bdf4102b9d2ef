package reconcile

import (
	"log/slog"
	"time"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Config is what a Controller is built from: where its VMs are (VMs) and what it follows of
// their CRD (CRD), the backend of their servers and the policies it decides by, how failures
// are retried (Retry), and what it reports to (Report).
type Config struct {
	VMs     Source
	CRD     CRD
	Backend backend.Backend
	Policy  decision.Policy
	// Usage says how to sample the usage of Active VMs; a zero Interval, or a backend that
	// cannot report usage, turns sampling off.
	Usage  decision.UsagePolicy
	Retry  Retry
	Report Report
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Namespaces, if set, says which namespaces are being deleted: a VM in one is left alone
	// until its own deletion, then only released, with no status written (namespaces.go).
	// Nil: every namespace is taken as live.
	Namespaces Namespaces
	// Fence, if set, says whether this replica may still write: nil while it may, else an
	// error wrapping ErrFenced (a leader whose Lease has not been renewed within the renew
	// deadline: it may have been paused while another replica took over). Each decision round
	// asks it first, so that no round decides on state that another leader may have changed
	// since; the writes themselves are refused below the clients whatever a round asks. A
	// reconcile that meets ErrFenced, from here or from a write, is looked at again after
	// fencedWait, not retried with backoff. Nil: no fence (no leader election).
	Fence func() error
}

// Source is where a controller's VMs are: the clients its informer of the VMs lists and
// watches with and its writes go through, and which VMs, of which resource, in which layout.
type Source struct {
	Client dynamic.Interface
	// REST, if set, is what the VM informer lists and watches with and what VMs are written
	// through (see vmcache.RESTClientFor and restWriter): each VM, watched or written, is
	// decoded once, from the wire into its compact form. Nil: the dynamic informer over
	// Client, whose objects are compacted by a transform, and writes through Client (what unit
	// tests with the dynamic fake use).
	REST rest.Interface
	// WatchREST, if set, is what the VM informer watches with instead of REST: a client
	// without REST's rate limiter, as client-go leaves watches unlimited, so that a watch
	// (or a watch list, the informer's first fill) never waits behind a burst of writes.
	WatchREST rest.Interface
	GVR       k8sschema.GroupVersionResource
	Fields    schema.Fields
	Namespace string // "" for all namespaces
	Selector  string // label selector of the VMs to manage; "" for all
	Resync    time.Duration
}

// CRD is what a controller knows, and follows, of its resource's CustomResourceDefinition.
type CRD struct {
	// Watch follows the resource's CustomResourceDefinition: when it is deleted or stops
	// serving the version, the controller says so and waits; when it is back, it resumes.
	Watch bool
	// OnServed, if set, is called when the resource stops or starts being served.
	OnServed func(served bool)
	// Layout, if set, is the built-in layout Source.Fields were chosen as from the CRD's
	// schema at start-up (crds.ChooseLayout: a CRD of another group, no field-map file).
	// Fields are built into the informer, the decisions and every write, and a CRD can be
	// changed in place to give another layout (an earlier release's copy upgraded to the
	// current shape): read with the old one, what only the new one has, a disk's reclaim
	// policy, would never be read, and a kept disk would be deleted with its VM. So with Watch
	// the CRD watch chooses again on every change of the CRD, and when the choice differs it
	// stops the informer of the VMs and calls OnLayoutChanged, for the process to stop and
	// choose again on its restart. Until the watch has judged the CRD of its first list the
	// resource does not count as served, so no worker starts before. Nil: Fields came from a
	// file or are built in, and no change of the CRD changes them.
	Layout *crds.Layout
	// OnLayoutChanged, if set, is called once, with a *crds.LayoutChanged, when the CRD no
	// longer gives Layout, after the informer of the VMs has stopped: the caller ends the
	// process (a leader steps down), which the informer's stop alone does not.
	OnLayoutChanged func(error)
	// NoStatusSubresource says the CRD version has no /status subresource (crds.StatusSubresource):
	// status and usage are then written through the main resource, conditional on the
	// resourceVersion decided on, and each write claims the generation it makes
	// (statusroute.go). False, the zero value: through /status.
	NoStatusSubresource bool
}

// Retry is how a controller paces the retries of failed reconciles, and when it cuts one off.
type Retry struct {
	// RateLimiter paces retries of failed keys; nil: per-item exponential backoff
	// (5ms to 1000s) and an overall bucket (10 qps, burst 100), as client-go's default.
	RateLimiter workqueue.TypedRateLimiter[cache.ObjectName]
	// ConflictRateLimiter paces the retries of a VM whose write met a conflict; nil:
	// per-item exponential backoff (5ms to 1000s). A conflict says that the cache was behind
	// a write, not that the API server is overloaded, so it waits for this VM's backoff only,
	// never in RateLimiter's overall bucket: in a namespace's teardown, conflicts queued in that
	// bucket (10 a second) took longer than the teardown itself. Give it the per-item part of
	// RateLimiter, so that a VM's failures of either kind count together.
	ConflictRateLimiter workqueue.TypedRateLimiter[cache.ObjectName]
	// UnsettledRateLimiter paces a VM whose reconcile ran out of decisions (maxDecisions)
	// before its plans settled: the first time it is queued again at once, as new work; each
	// next time in a row, after this limiter's delay, until a reconcile of it settles. Plans
	// that never settle (a defect, or a write that something changes each time) then cost a
	// few writes a minute, not a loop as fast as the API server answers that starves the
	// backlog. nil: per-item exponential backoff (100ms to 1 minute).
	UnsettledRateLimiter workqueue.TypedRateLimiter[cache.ObjectName]
	// ReconcileTimeout bounds each reconcile, every API and backend call in it: a call that
	// hangs ends as a transient error and the key is retried, instead of holding a worker
	// for ever. Zero: no deadline.
	ReconcileTimeout time.Duration
}

// Report is what a controller tells what it does: the VMs' owners (Events), the operator
// (logs) and the metrics.
type Report struct {
	Recorder events.EventRecorder
	Logger   *slog.Logger
	// Observer, if set, is told the result and duration of every reconcile.
	Observer Observer
	// UsageObserver, if set, receives each sample.
	UsageObserver UsageObserver
}
