// Command resizer plays, on the local cluster, the parts of a kubelet and of a CSI driver that
// kwok v0.7.0 and kube-controller-manager's in-tree host-path volumes leave undone, for the
// pods and claims of kwok's fake nodes:
//
//   - In-place pod resize (Kubernetes 1.35+), as a kubelet (kubelet.go, pods.go): it reports
//     each running container's resources in its status (without which the API server refuses
//     pods/resize), and when a pod's spec asks for other cpu or memory it answers
//     PodResizePending (Infeasible beyond the node's allocatable, Deferred beyond what is free
//     on it), then PodResizeInProgress, then the new resources in the container status and the
//     condition cleared. A pod's annotation resize.kwok.cloudnative.czs/answer (Infeasible,
//     Deferred or Error) makes it answer so for tests.
//   - Ending terminating pods, as a kubelet, with the pod's UID as a precondition, in place of
//     kwok's pod-delete stage, which deletes by name (pods.go, see removal); an eviction's
//     graceful delete included.
//   - Expanding claims, as a CSI driver's external resizer and then the kubelet
//     (expand.go, claims.go): kube-controller-manager's expand controller leaves a host-path
//     volume to "an external controller", so when a bound claim of the host-path provisioner
//     asks for more than it has, this program grows the volume and walks the claim's status
//     through what Kubernetes 1.36 shows (Resizing, ControllerResizeInProgress, then
//     FileSystemResizePending, NodeResizePending and NodeResizeInProgress until a pod that
//     mounts it runs, then the new capacity). The claim's annotation
//     expand.kwok.cloudnative.czs/answer=Infeasible makes it refuse as a driver does.
//   - Losing a node (nodes.go): it stops acting for a node whose Lease a test has taken (see
//     LostHolder), as a kubelet that is gone does nothing.
//
// Why not kwok Stages: a Stage selects on one object's fields and renders its status from that
// object alone, so it cannot weigh a resize against the node's allocatable and the other pods
// on the node (Deferred), compare quantities by value ("1" and "1000m"), write a claim and its
// volume together, nor ask whether a pod runs that mounts a claim. What a Stage does express
// cleanly (pods that end on purpose, images that fail to pull) is in cluster/stages.yaml.
//
// It acts only for nodes kwok manages (annotation kwok.x-k8s.io/node=fake) and for volumes of
// the host-path provisioner, so it never competes with a real kubelet or driver.
// cluster/cluster.sh starts and stops it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	actuate := flag.Duration("actuate-after", time.Second, "how long a pod's resize, or a volume's expansion by its driver, stays in progress before it is done")
	workers := flag.Int("workers", 4, "pods, and claims, handled at once")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*kubeconfig, *actuate, *workers, log); err != nil {
		log.Error("Resizer failed", "err", err)
		os.Exit(1)
	}
}

// resizer holds the caches the stand-in kubelet and driver read, and a queue for each kind of
// object they act on.
type resizer struct {
	client                               kubernetes.Interface
	pods, nodes, leases, claims, volumes cache.SharedIndexInformer
	podQueue, claimQueue                 workqueue.TypedRateLimitingInterface[cache.ObjectName]
	actuate                              time.Duration
	log                                  *slog.Logger
}

func run(kubeconfig string, actuate time.Duration, workers int, log *slog.Logger) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	cfg.UserAgent = "kwok-resizer"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("make client: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	r := newResizer(client, actuate, log)
	if err := r.watch(); err != nil {
		return err
	}
	informers := []cache.SharedIndexInformer{r.pods, r.nodes, r.leases, r.claims, r.volumes}
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, inf := range informers {
		go inf.RunWithContext(ctx)
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("caches did not sync")
	}
	log.Info("Resizer started", "actuateAfter", actuate, "workers", workers)
	for range workers {
		go func() {
			for r.next(ctx, r.podQueue, r.handlePod) {
			}
		}()
		go func() {
			for r.next(ctx, r.claimQueue, r.handleClaim) {
			}
		}()
	}
	<-ctx.Done()
	r.podQueue.ShutDown()
	r.claimQueue.ShutDown()
	log.Info("Resizer stopped")
	return nil
}

// newResizer makes the caches (not yet running) and the queues.
func newResizer(client kubernetes.Interface, actuate time.Duration, log *slog.Logger) *resizer {
	core := client.CoreV1().RESTClient()
	newQueue := func() workqueue.TypedRateLimitingInterface[cache.ObjectName] {
		return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())
	}
	return &resizer{client: client, actuate: actuate, log: log, podQueue: newQueue(), claimQueue: newQueue(),
		pods: cache.NewSharedIndexInformer(cache.NewListWatchFromClient(core, "pods", "", fields.Everything()),
			&corev1.Pod{}, 0, cache.Indexers{byNode: podNode, byClaim: podClaims}),
		nodes: cache.NewSharedIndexInformer(cache.NewListWatchFromClient(core, "nodes", "", fields.Everything()),
			&corev1.Node{}, 0, cache.Indexers{}),
		leases: cache.NewSharedIndexInformer(cache.NewListWatchFromClient(client.CoordinationV1().RESTClient(), "leases",
			corev1.NamespaceNodeLease, fields.Everything()), &coordinationv1.Lease{}, 0, cache.Indexers{}),
		claims: cache.NewSharedIndexInformer(cache.NewListWatchFromClient(core, "persistentvolumeclaims", "", fields.Everything()),
			&corev1.PersistentVolumeClaim{}, 0, cache.Indexers{}),
		volumes: cache.NewSharedIndexInformer(cache.NewListWatchFromClient(core, "persistentvolumes", "", fields.Everything()),
			&corev1.PersistentVolume{}, 0, cache.Indexers{}),
	}
}

// watch connects the caches to the queues: a pod is looked at when it or the Lease of its node
// changes, and a claim when it, its volume, a pod that uses it or that pod's node's Lease
// changes. It also slims the cached pods (see slimPod).
func (r *resizer) watch() error {
	if err := r.pods.SetTransform(slimPod); err != nil {
		return fmt.Errorf("set pod transform: %w", err)
	}
	handlers := []struct {
		what     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{"pods", r.pods, cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { r.enqueue(r.podQueue, obj); r.enqueueClaimsOf(obj) },
			UpdateFunc: func(old, cur any) {
				r.enqueue(r.podQueue, cur)
				r.retryDeferred(cur)
				r.enqueueClaimsOf(old)
				r.enqueueClaimsOf(cur)
			},
			DeleteFunc: r.retryDeferred,
		}},
		{"leases", r.leases, cache.ResourceEventHandlerFuncs{
			AddFunc:    r.enqueueNodeOf,
			UpdateFunc: func(_, cur any) { r.enqueueNodeOf(cur) },
			DeleteFunc: r.enqueueNodeOf,
		}},
		{"claims", r.claims, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.enqueue(r.claimQueue, obj) },
			UpdateFunc: func(_, cur any) { r.enqueue(r.claimQueue, cur) },
		}},
		{"volumes", r.volumes, cache.ResourceEventHandlerFuncs{
			AddFunc:    r.enqueueClaimOf,
			UpdateFunc: func(_, cur any) { r.enqueueClaimOf(cur) },
		}},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return fmt.Errorf("watch %s: %w", h.what, err)
		}
	}
	return nil
}

// enqueue adds obj's key to q.
func (r *resizer) enqueue(q workqueue.TypedRateLimitingInterface[cache.ObjectName], obj any) {
	if key, err := cache.ObjectToName(obj); err == nil {
		q.Add(key)
	}
}

// next handles one key of q with handle, in the style of a controller's worker: an error is
// retried with backoff, a step that waits is looked at again after its wait.
func (r *resizer) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[cache.ObjectName],
	handle func(context.Context, cache.ObjectName) (time.Duration, error)) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	after, err := handle(ctx, key)
	switch {
	case err != nil:
		r.log.Info("Step failed; retrying", "key", key.String(), "err", err)
		q.AddRateLimited(key)
	case after > 0:
		q.Forget(key)
		q.AddAfter(key, after)
	default:
		q.Forget(key)
	}
	return true
}
