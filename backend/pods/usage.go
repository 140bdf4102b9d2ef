package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// PodMetricsGVR is where metrics-server (or any metrics.k8s.io provider) serves a pod's usage.
var PodMetricsGVR = schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}

var _ backend.UsageReader = (*Backend)(nil)

// minUsageAge is the least UsageMaxAge gives, and what Config.UsageMaxAge 0 means: a
// provider's figures move only once per its own resolution (metrics-server's
// --metric-resolution, 15s by default, over the kubelet's cAdvisor figures of about 10s), so
// a list more often than every few seconds returns the same figures again at the cost of
// every server pod's; 5s keeps what a sample may lag behind the provider at a third of its
// default resolution.
const minUsageAge = 5 * time.Second

// UsageMaxAge is how old the snapshot of usage may grow for VMs sampled every interval (run's
// --usage-interval): half of it, never under minUsageAge. The VMs' samples spread over the
// interval, so the pod metrics are listed about twice per interval whatever the number of
// VMs, and a sample reads figures at most half an interval older than the provider's. A
// snapshot as old as the interval would halve the lists, but a sample could then report the
// figures its VM's previous sample had already reported, an interval late.
func UsageMaxAge(interval time.Duration) time.Duration {
	return max(interval/2, minUsageAge)
}

// usageListPage is the limit of each page of the list of pod metrics. metrics-server (v0.9,
// pkg/api/pod.go) reads only the label and field selectors of a list and answers every pod
// at once, without a continue token, so with it the list is one request and one response
// whatever the limit; a provider that honours the limit is listed a page at a time, each page
// folded into the snapshot and dropped before the next.
const usageListPage = 500

// Usage answers what vm's server pod consumes from a snapshot of every labelled server pod's
// PodMetrics, made by one list of the metrics.k8s.io API within the backend's namespace (all
// namespaces when it watches all) and made again when it is older than Config.UsageMaxAge. A
// sample thus costs no request of its own: the API cost of sampling is a list per
// UsageMaxAge whatever the number of VMs, where a read per sample held to --usage-qps left
// each VM's figures as old as the number of VMs over the qps (8 minutes at 10,000 VMs and the
// default 20). The reads go through Config.UsageClient, whose own rate limit keeps them from
// delaying reconciles.
//
// A pod the list does not show has no figures yet (backend.ErrNoUsage); a metrics API the
// cluster does not serve is backend.ErrUsageUnavailable. Where RBAC grants get but not list
// on pods.metrics.k8s.io, each VM's pod is read on its own, as before the snapshot, until a
// list is let through again.
func (b *Backend) Usage(ctx context.Context, vm backend.Owner) (backend.Usage, error) {
	if b.cfg.UsageClient == nil {
		return backend.Usage{}, fmt.Errorf("no usage client: %w", backend.ErrUsageUnavailable)
	}
	s, err := b.usage.get(ctx, b.usageMaxAge(), b.listUsage)
	switch {
	case err != nil:
		return backend.Usage{}, err
	case s.err != nil:
		return backend.Usage{}, s.err
	case s.perPod:
		return b.readPodUsage(ctx, vm)
	}
	key := vm.Namespace + "/" + PodName(vm.Name)
	if u, ok := s.pods[key]; ok {
		return u.usage(), nil
	}
	if err, ok := s.bad[key]; ok {
		return backend.Usage{}, err
	}
	return backend.Usage{}, fmt.Errorf("pod metrics of %s: not in the list taken at %s: %w", PodName(vm.Name), s.taken.Format(time.RFC3339), backend.ErrNoUsage)
}

func (b *Backend) usageMaxAge() time.Duration {
	if b.cfg.UsageMaxAge > 0 {
		return b.cfg.UsageMaxAge
	}
	return minUsageAge
}

// usageCache holds the latest snapshot of usage and the list under way, so that callers that
// find the snapshot too old wait for one list, not one each. Its zero value has no snapshot.
type usageCache struct {
	// now is the clock that ages snapshots; nil: time.Now (tests set it).
	now func() time.Time

	mu     sync.Mutex
	cur    *usageSnapshot // nil: none yet
	flight *usageFlight   // the list under way; nil: none
	// refused says the last list that was answered was refused (Forbidden): the change is
	// logged, not each refusal.
	refused bool
}

// usageFlight is one list under way; snap is set before done is closed.
type usageFlight struct {
	done chan struct{}
	snap *usageSnapshot
}

// usageSnapshot is what one list of pod metrics gave, kept until it is older than the
// maximum age: a failure too, so that a list that fails (or outlasts the sample's deadline)
// is tried once per window, not once per VM. It keeps per pod two integers, not the list's
// objects: about 8 MB at 100,000 pods.
type usageSnapshot struct {
	taken time.Time           // when the list began
	pods  map[string]podUsage // by namespace/name of the pod
	bad   map[string]error    // pods whose figures do not read (a container with none, a bad quantity)
	err   error               // the list failed: every VM's answer until the next one
	// perPod: RBAC refuses the list; each VM's pod is read on its own until the next one.
	perPod bool
}

// podUsage is a pod's usage summed over its containers: cpu in nanocores, memory in bytes.
type podUsage struct{ cpu, memory int64 }

func (u podUsage) usage() backend.Usage {
	return backend.Usage{CPU: *resource.NewScaledQuantity(u.cpu, resource.Nano), Memory: *resource.NewQuantity(u.memory, resource.BinarySI)}
}

// get returns the snapshot, listing it again through list when it is maxAge old or older.
// One caller lists, under its own ctx; the others wait for that list, or for their ctx.
func (c *usageCache) get(ctx context.Context, maxAge time.Duration, list func(context.Context, time.Time) *usageSnapshot) (*usageSnapshot, error) {
	c.mu.Lock()
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	t := now()
	if s := c.cur; s != nil && t.Sub(s.taken) < maxAge {
		c.mu.Unlock()
		return s, nil
	}
	if f := c.flight; f != nil {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.snap, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the list of pod metrics: %w", ctx.Err())
		}
	}
	f := &usageFlight{done: make(chan struct{})}
	c.flight = f
	c.mu.Unlock()
	defer func() {
		if f.snap == nil { // list panicked: its callers are not left waiting
			f.snap = &usageSnapshot{taken: now(), err: errors.New("list pod metrics: panicked")}
		}
		keep := f.snap
		if keep.err != nil && ctx.Err() != nil {
			// Cut short by this caller's own end (its deadline, a drain), which says nothing
			// of the metrics API: not every VM's answer for a window, the next caller lists.
			keep = c.cur
		}
		c.mu.Lock()
		c.cur, c.flight = keep, nil
		c.mu.Unlock()
		close(f.done)
	}()
	f.snap = list(ctx, t)
	if f.snap.err != nil {
		// A failure holds for a window from when it came, not from when the list began:
		// a list that outlasted the window would leave one already stale.
		f.snap.taken = now()
	}
	return f.snap, nil
}

// listUsage lists the pod metrics of every labelled server pod (the pod informer's selector,
// in the namespace it watches) into a snapshot taken at t.
func (b *Backend) listUsage(ctx context.Context, t time.Time) *usageSnapshot {
	s := &usageSnapshot{taken: t, pods: map[string]podUsage{}}
	client := b.cfg.UsageClient.Resource(PodMetricsGVR).Namespace(b.cfg.Namespace)
	opts := metav1.ListOptions{LabelSelector: LabelVMUID, Limit: usageListPage}
	for {
		list, err := client.List(ctx, opts)
		if err != nil {
			b.listFailed(ctx, s, err)
			return s
		}
		for i := range list.Items {
			m := &list.Items[i]
			key := m.GetNamespace() + "/" + m.GetName()
			u, err := sumUsage(m)
			if err != nil {
				if s.bad == nil {
					s.bad = map[string]error{}
				}
				s.bad[key] = err
				continue
			}
			s.pods[key] = podUsage{cpu: u.CPU.ScaledValue(resource.Nano), memory: u.Memory.Value()}
		}
		next := list.GetContinue()
		if next == "" {
			break
		}
		if next == opts.Continue { // a provider that would page forever
			b.listFailed(ctx, s, fmt.Errorf("the provider answered continue token %q with itself", next))
			return s
		}
		opts.Continue = next
	}
	b.usage.listAnswered(b.log(), false, nil)
	return s
}

// listFailed makes s the snapshot of a list that failed with err.
func (b *Backend) listFailed(ctx context.Context, s *usageSnapshot, err error) {
	s.pods = nil
	switch {
	case apierrors.IsForbidden(err):
		s.perPod = true
		b.usage.listAnswered(b.log(), true, err)
	case apierrors.IsNotFound(err):
		// metrics-server lists an unknown pod as none, never NotFound: through the
		// aggregator, NotFound is the whole API missing, which discovery confirms.
		if served, derr := b.metricsServed(ctx); derr == nil && !served {
			s.err = fmt.Errorf("the cluster does not serve %s: %w", PodMetricsGVR.GroupVersion(), backend.ErrUsageUnavailable)
			return
		}
		s.err = fmt.Errorf("list pod metrics: %w: %w", err, backend.ErrNoUsage)
	case apierrors.IsServiceUnavailable(err):
		s.err = fmt.Errorf("list pod metrics: %w: %w", err, backend.ErrUsageUnavailable)
	default:
		s.err = fmt.Errorf("list pod metrics: %w", err)
	}
}

// listAnswered notes whether a list was refused, and logs the change: a refusal once when
// usage falls back to a read per sample, a list let through once when it is listed again.
func (c *usageCache) listAnswered(log *slog.Logger, refused bool, err error) {
	c.mu.Lock()
	changed := c.refused != refused
	c.refused = refused
	c.mu.Unlock()
	switch {
	case changed && refused:
		log.Warn("RBAC denies list on pods.metrics.k8s.io: usage is read one server pod per request, held to --usage-qps, until list is granted (vm-controller manifests grants it)", "error", err)
	case changed:
		log.Info("Pod metrics are listed again: usage is read in one request per refresh")
	}
}

func (b *Backend) log() *slog.Logger {
	if b.cfg.Log != nil {
		return b.cfg.Log
	}
	return slog.Default()
}

// readPodUsage reads the PodMetrics of vm's server pod alone: the way usage is read while RBAC
// refuses the list.
func (b *Backend) readPodUsage(ctx context.Context, vm backend.Owner) (backend.Usage, error) {
	name := PodName(vm.Name)
	u, err := b.cfg.UsageClient.Resource(PodMetricsGVR).Namespace(vm.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// metrics-server answers NotFound both for a pod it has not scraped yet and, through
		// the aggregator, when the whole API is missing: discovery tells them apart.
		if served, derr := b.metricsServed(ctx); derr == nil && !served {
			return backend.Usage{}, fmt.Errorf("the cluster does not serve %s: %w", PodMetricsGVR.GroupVersion(), backend.ErrUsageUnavailable)
		}
		return backend.Usage{}, fmt.Errorf("pod metrics of %s: %w", name, backend.ErrNoUsage)
	}
	if apierrors.IsServiceUnavailable(err) {
		return backend.Usage{}, fmt.Errorf("%w: %w", err, backend.ErrUsageUnavailable)
	}
	if err != nil {
		return backend.Usage{}, fmt.Errorf("get pod metrics of %s: %w", name, err)
	}
	return sumUsage(u)
}

// metricsServed asks discovery whether metrics.k8s.io serves pods, within ctx: the sample's
// deadline binds it as it binds the read it follows (an aggregated API that does not answer
// would hold the one usage poller, and every VM's sample behind it, for the API server's own
// timeout). Client-go's ServerResourcesForGroupVersion takes no context, so the request is
// made through the discovery client's REST client; a discovery without one (a fake) is asked
// the plain way.
func (b *Backend) metricsServed(ctx context.Context) (bool, error) {
	if b.cfg.Discovery == nil {
		return true, nil
	}
	gv := PodMetricsGVR.GroupVersion()
	var list *metav1.APIResourceList
	var err error
	if rc := b.cfg.Discovery.RESTClient(); rc != nil {
		list = &metav1.APIResourceList{}
		err = rc.Get().AbsPath("/apis", gv.Group, gv.Version).Do(ctx).Into(list)
	} else {
		list, err = b.cfg.Discovery.ServerResourcesForGroupVersion(gv.String())
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == PodMetricsGVR.Resource {
			return true, nil
		}
	}
	return false, nil
}

func sumUsage(u *unstructured.Unstructured) (backend.Usage, error) {
	containers, _, err := unstructured.NestedSlice(u.Object, "containers")
	if err != nil {
		return backend.Usage{}, fmt.Errorf("read pod metrics of %s: %w", u.GetName(), err)
	}
	if len(containers) == 0 {
		return backend.Usage{}, fmt.Errorf("pod metrics of %s list no container: %w", u.GetName(), backend.ErrNoUsage)
	}
	var total backend.Usage
	for _, c := range containers {
		m, _ := c.(map[string]any)
		usage, _ := m["usage"].(map[string]any)
		for key, dst := range map[string]*resource.Quantity{"cpu": &total.CPU, "memory": &total.Memory} {
			s, _ := usage[key].(string)
			q, err := resource.ParseQuantity(s)
			if err != nil {
				return backend.Usage{}, fmt.Errorf("pod metrics of %s: %s usage %q: %w", u.GetName(), key, s, err)
			}
			dst.Add(q)
		}
	}
	return total, nil
}

// discoveryClient is the part of discovery the backend uses.
type discoveryClient = discovery.DiscoveryInterface
