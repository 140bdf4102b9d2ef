package pods

import (
	"context"
	"fmt"

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

// Usage reads the PodMetrics of vm's server pod from the metrics.k8s.io API and adds up its
// containers. It uses Config.UsageClient, whose own rate limit keeps usage polling from
// delaying reconciles.
func (b *Backend) Usage(ctx context.Context, vm backend.Owner) (backend.Usage, error) {
	if b.cfg.UsageClient == nil {
		return backend.Usage{}, fmt.Errorf("no usage client: %w", backend.ErrUsageUnavailable)
	}
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
		return backend.Usage{}, fmt.Errorf("%s: %w", err.Error(), backend.ErrUsageUnavailable)
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
