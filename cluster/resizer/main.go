// Command resizer plays the kubelet's part of in-place pod resize (Kubernetes 1.35+) for the
// pods on kwok's fake nodes of the local cluster, which kwok v0.7.0 does not do: it reports
// each running container's resources in its status (without which the API server refuses
// pods/resize), and when a pod's spec asks for other cpu or memory it answers as a kubelet
// does: PodResizePending (Infeasible beyond the node's allocatable, Deferred beyond what is
// free on it), then PodResizeInProgress, then the new resources in the container status and
// the condition cleared. A pod's annotation resize.kwok.cloudnative.czs/answer (Infeasible,
// Deferred or Error) makes it answer so for tests.
//
// It also ends terminating pods on those nodes, as a kubelet does, with the pod's UID as a
// precondition, in place of kwok's pod-delete stage, which deletes by name (see removal).
//
// Why not kwok Stages: a Stage selects on one object's fields and renders its status from that
// object alone, so it cannot weigh a resize against the node's allocatable and the other pods
// on the node (Deferred), nor compare quantities by value ("1" and "1000m").
//
// It acts only on pods bound to nodes kwok manages (annotation kwok.x-k8s.io/node=fake), so it
// never competes with a real kubelet. cluster/cluster.sh starts and stops it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// kwokNodeAnnotation marks the nodes kwok manages (kwokctl scale node sets it).
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// byNode indexes pods by the node they are bound to.
const byNode = "node"

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	actuate := flag.Duration("actuate-after", time.Second, "how long a resize stays in progress before its resources are in effect")
	workers := flag.Int("workers", 4, "pods handled at once")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*kubeconfig, *actuate, *workers, log); err != nil {
		log.Error("Resizer failed", "err", err)
		os.Exit(1)
	}
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

	r := &resizer{client: client, actuate: actuate, log: log,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())}
	r.pods = cache.NewSharedIndexInformer(cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "pods", "", fields.Everything()),
		&corev1.Pod{}, 0, cache.Indexers{byNode: func(obj any) ([]string, error) {
			if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				return []string{p.Spec.NodeName}, nil
			}
			return nil, nil
		}})
	r.nodes = cache.NewSharedIndexInformer(cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "nodes", "", fields.Everything()),
		&corev1.Node{}, 0, cache.Indexers{})
	if err := r.pods.SetTransform(slimPod); err != nil {
		return fmt.Errorf("set pod transform: %w", err)
	}
	enqueue := func(obj any) {
		if key, err := cache.ObjectToName(obj); err == nil {
			r.queue.Add(key)
		}
	}
	if _, err := r.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, cur any) { enqueue(cur); r.retryDeferred(cur) },
		DeleteFunc: r.retryDeferred,
	}); err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	go r.pods.RunWithContext(ctx)
	go r.nodes.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), r.pods.HasSynced, r.nodes.HasSynced) {
		return errors.New("caches did not sync")
	}
	log.Info("Resizer started", "actuateAfter", actuate, "workers", workers)
	for range workers {
		go func() {
			for r.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	r.queue.ShutDown()
	log.Info("Resizer stopped")
	return nil
}

type resizer struct {
	client  kubernetes.Interface
	pods    cache.SharedIndexInformer
	nodes   cache.SharedIndexInformer
	queue   workqueue.TypedRateLimitingInterface[cache.ObjectName]
	actuate time.Duration
	log     *slog.Logger
}

// retryDeferred looks again at the deferred resizes on the node of a pod that changed or went:
// it may have freed room, as a kubelet retries deferred resizes when pods change.
func (r *resizer) retryDeferred(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	others, _ := r.pods.GetIndexer().ByIndex(byNode, p.Spec.NodeName)
	for _, o := range others {
		op := o.(*corev1.Pod)
		if c := findCondition(op.Status, corev1.PodResizePending); c != nil && c.Reason == corev1.PodReasonDeferred && op.UID != p.UID {
			r.queue.Add(cache.MetaObjectToName(op))
		}
	}
}

func (r *resizer) next(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	after, err := r.handle(ctx, key)
	switch {
	case err != nil:
		r.log.Info("Resize step failed; retrying", "pod", key.String(), "err", err)
		r.queue.AddRateLimited(key)
	case after > 0:
		r.queue.Forget(key)
		r.queue.AddAfter(key, after)
	default:
		r.queue.Forget(key)
	}
	return true
}

// handle takes the next kubelet step for one pod and writes it, on the condition that the pod
// is still the version it was decided on.
func (r *resizer) handle(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	obj, ok, err := r.pods.GetIndexer().GetByKey(key.String())
	if err != nil || !ok {
		return 0, err
	}
	pod := obj.(*corev1.Pod)
	nobj, ok, err := r.nodes.GetIndexer().GetByKey(pod.Spec.NodeName)
	if err != nil || !ok {
		return 0, err
	}
	node := nobj.(*corev1.Node)
	if node.Annotations[kwokNodeAnnotation] != "fake" {
		return 0, nil // a real kubelet's pod
	}
	if pod.DeletionTimestamp != nil {
		return 0, r.remove(ctx, pod)
	}
	s := kubelet(pod, r.room(node, pod), time.Now(), r.actuate)
	if s.what == "" {
		return s.after, nil
	}
	patch, err := statusPatch(pod, s.status)
	if err != nil {
		return 0, err
	}
	_, err = r.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: "kwok-resizer"}, "status")
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("write status of pod %s: %w", key, err)
	}
	r.log.Info("Resize step", "pod", key.String(), "step", s.what)
	return s.after, nil
}

// remove ends a terminating pod as a kubelet does once its containers have stopped: deleted
// at once, on the condition that it is still the same pod (see removal).
func (r *resizer) remove(ctx context.Context, pod *corev1.Pod) error {
	err := r.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, removal(pod))
	switch {
	case apierrors.IsNotFound(err):
		return nil // gone already
	case apierrors.IsConflict(err):
		return nil // the name is a newer pod's now: not this one to delete
	case err != nil:
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	r.log.Info("Deleted pod", "pod", pod.Namespace+"/"+pod.Name, "uid", pod.UID)
	return nil
}

// removal is how a kubelet deletes a pod it has stopped: at once (grace period 0), and only
// if the name still belongs to the pod of that UID. kwok's own pod-delete stage deletes by
// name alone, so a delete it queued for a pod that has since gone can remove a new pod of the
// same name, such as the server vm-controller creates in place of a deleted one (the kubelet
// has used the UID since kubernetes/kubernetes#25224 for the same reason). cluster/cluster.sh
// leaves that stage out of kwok's configuration when this program runs.
func removal(pod *corev1.Pod) metav1.DeleteOptions {
	uid := pod.UID
	return metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}}
}

// room is what node has for pod: its allocatable, and what its other pods that still run
// have been granted (allocated, else asked for).
func (r *resizer) room(node *corev1.Node, pod *corev1.Pod) room {
	rm := room{allocatable: node.Status.Allocatable, used: corev1.ResourceList{}}
	others, _ := r.pods.GetIndexer().ByIndex(byNode, node.Name)
	for _, o := range others {
		op := o.(*corev1.Pod)
		if op.UID == pod.UID || op.Status.Phase == corev1.PodSucceeded || op.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range op.Spec.Containers {
			granted := c.Resources.Requests
			for _, cs := range op.Status.ContainerStatuses {
				if cs.Name == c.Name && cs.AllocatedResources != nil {
					granted = cs.AllocatedResources
				}
			}
			addTo(rm.used, granted)
		}
	}
	return rm
}

// statusPatch is the strategic merge patch from pod's status to status, on the condition of
// pod's resourceVersion: conditions merge by type, so it touches only the ones the step
// changed and deletes the ones it removed; the container statuses go whole.
func statusPatch(pod *corev1.Pod, status corev1.PodStatus) ([]byte, error) {
	old, err := json.Marshal(corev1.Pod{Status: pod.Status})
	if err != nil {
		return nil, err
	}
	cur, err := json.Marshal(corev1.Pod{Status: status})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(old, cur, corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("diff status: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"] = map[string]any{"resourceVersion": pod.ResourceVersion}
	return json.Marshal(m)
}

// slimPod keeps what the stand-in kubelet reads and writes of a pod: a cluster's worth of whole
// pods would be most of its memory.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		Generation: p.Generation, DeletionTimestamp: p.DeletionTimestamp,
	}}
	for _, a := range []string{AnswerAnnotation, UsageMemoryAnnotation} {
		if v, ok := p.Annotations[a]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[a] = v
		}
	}
	out.Spec.NodeName = p.Spec.NodeName
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Resources: cpuMemory(c.Resources)})
	}
	// The container statuses stay whole: the API server replaces the list as one (listType
	// atomic), so a patch of one container's resources carries all of it.
	out.Status = corev1.PodStatus{Phase: p.Status.Phase, ObservedGeneration: p.Status.ObservedGeneration,
		Conditions: p.Status.Conditions, ContainerStatuses: p.Status.ContainerStatuses}
	return out, nil
}
