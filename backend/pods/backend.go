package pods

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// fieldManager names the controller in the managedFields of what it makes and changes: the
// pods, claims and budgets. A pod's tolerations owned by another manager were changed after
// it was made (tolerationsChanged).
const fieldManager = "vm-controller"

// byNode indexes server pods by the node they are bound to, so that a node's change reaches
// the VMs on it.
const byNode = "node"

// Config says where the backend looks.
type Config struct {
	// Client is a typed clientset; the pods and nodes are watched and pods written through
	// it. Give it a rest.Config whose ContentType is protobuf (see run.go): a typed
	// protobuf informer decodes a pod several times faster than JSON into unstructured maps
	// and the reflection-based converter.
	Client kubernetes.Interface
	// REST is a REST client of Client's protobuf config without a rate limiter (watches are
	// not rate limited; see run.go), over which the pods are watched and each event read in
	// place (wire.go); nil: Client's typed informer (the unit tests' fake clientset).
	REST      rest.Interface
	Namespace string        // "" for all namespaces
	Resync    time.Duration // informer resync period; 0 disables
	// WatchNodes tells a lost node (Ready not True, or the node gone) from a pod that merely
	// runs. It needs cluster-wide read access to nodes; without it only the kubelet's own
	// "Unknown" pod phase marks a server lost.
	WatchNodes bool
	// UsageClient reads usage from metrics.k8s.io; nil: the backend reports no usage. It
	// should have its own rate limit, so that polling never delays a reconcile. It lists the
	// pod metrics (usage.go), which needs list on pods.metrics.k8s.io; with get alone it
	// reads each pod's.
	UsageClient dynamic.Interface
	// UsageMaxAge is how old the snapshot of every server pod's usage that Usage answers
	// from may grow before a sample lists it again: run gives UsageMaxAge(--usage-interval).
	// 0: minUsageAge.
	UsageMaxAge time.Duration
	// Discovery tells a missing metrics API from a pod without figures yet.
	Discovery discoveryClient
	// Disks keeps each VM's disk as a PersistentVolumeClaim (backend.Disks, disks.go): it
	// watches the labelled claims, the StorageClasses and the Events on claims, which needs
	// read access to them (StorageClasses cluster-wide). Without it, the backend keeps no
	// disks.
	Disks bool
	// ClaimsOnly, with Disks, watches the labelled claims alone, neither the StorageClasses
	// nor the Events, and needs read access to claims only: the controller makes and grows no
	// disk (--root-disk ephemeral), but keeps or deletes, as their VMs' reclaim policies say,
	// the ones made before (UpdateDisk, DeleteDisk).
	ClaimsOnly bool
	// Budgets keeps a PodDisruptionBudget for each VM whose eviction strategy is Block
	// (backend.Budgets, pdb.go): it watches the labelled budgets, which needs read and
	// write access to poddisruptionbudgets.
	Budgets bool
	// PodSecurity is the securityContext of the server pods the backend makes (security.go):
	// run's --server-pod-security. "" is PodSecurityNone.
	PodSecurity PodSecurity
	// Log is where the backend says what no caller is told: that RBAC refuses the list of
	// pod metrics (usage.go). nil: slog.Default().
	Log *slog.Logger
}

// Backend realises servers as pods. Build it with New, then Start it.
type Backend struct {
	cfg Config
	// pods is client-go's plain informer of the server pods, not a shared one: it calls its
	// one handler in the loop that stores each event, where a shared informer hands every
	// event on through two goroutines of its own (reconcile/controller.go's vmInformer says
	// why, and what it measured).
	pods     cache.Indexer
	podsCtrl cache.Controller
	// notify is Start's: each pod's change notifies its VM through it.
	notify func(types.NamespacedName)
	nodes  cache.SharedIndexInformer // nil unless cfg.WatchNodes
	// rooms is the nodes as hosts of new servers (room.go); nil unless cfg.WatchNodes.
	rooms *rooms
	disks *disks // nil unless cfg.Disks
	// budgets is nil unless cfg.Budgets.
	budgets *budgets
	// departures remembers the servers that went while disrupted (gone.go).
	departures departures
	// created maps the key of each pod Create made, and of each claim CreateDisk or
	// UpdateDisk wrote, to the resourceVersion it returned, until the informer brings the
	// object back (see echo). Pods and claims have names of their own (PodName, ClaimName).
	created sync.Map
	// usage is the snapshot of every server pod's usage that Usage answers from (usage.go).
	usage usageCache
}

var (
	_ backend.Backend       = (*Backend)(nil)
	_ backend.Objects       = (*Backend)(nil)
	_ backend.DiskObjects   = (*Backend)(nil)
	_ backend.BudgetObjects = (*Backend)(nil)
)

// podType is the API version and kind of a pod: of the pods it makes, and of the servers the
// Events about one name (ServerKind).
var podType = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}

// ServerKind says the servers are Pods (backend.Objects).
func (b *Backend) ServerKind() (apiVersion, kind string) { return podType.APIVersion, podType.Kind }

// claimType and budgetType are the API version and kind of the claims and the
// PodDisruptionBudgets the backend makes, and of the disks and budgets the Events about one
// name (DiskKind, BudgetKind).
var (
	claimType  = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}
	budgetType = metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}
)

// DiskKind says the disks are PersistentVolumeClaims (backend.DiskObjects).
func (b *Backend) DiskKind() (apiVersion, kind string) { return claimType.APIVersion, claimType.Kind }

// BudgetKind says the budgets are PodDisruptionBudgets (backend.BudgetObjects).
func (b *Backend) BudgetKind() (apiVersion, kind string) {
	return budgetType.APIVersion, budgetType.Kind
}

// New returns a pod backend; nothing is watched until Start.
func New(cfg Config) *Backend {
	b := &Backend{cfg: cfg, notify: func(types.NamespacedName) {}}
	var lw cache.ListerWatcher = &podListerWatcher{client: cfg.Client, rest: cfg.REST, namespace: cfg.Namespace, selector: LabelVMUID}
	if cfg.REST == nil {
		pods := cfg.Client.CoreV1().Pods(cfg.Namespace)
		// As client-go's typed informer does: a client that cannot stream a watch list (the
		// fake) is listed instead.
		lw = cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = LabelVMUID
				return pods.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = LabelVMUID
				return pods.Watch(ctx, o)
			},
		}, cfg.Client)
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		// Start's notify, once it is given; the informer runs only after. What is
		// remembered of disrupted servers is brought up to date first (gone.go).
		Handler: b.departures.handlers(b.vmHandlers(func(vm types.NamespacedName) { b.notify(vm) }, func(old, cur any) bool {
			return !old.(*cachedPod).sameVersion(cur.(*cachedPod))
		})),
		ResyncPeriod: cfg.Resync,
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, byNode: func(obj any) ([]string, error) {
			if p, ok := obj.(*cachedPod); ok && p.node != (interned{}) {
				return []string{p.node.String()}, nil
			}
			return nil, nil
		}},
		Transform: toCachedPod,
	})
	b.pods, b.podsCtrl = store.(cache.Indexer), ctrl
	if cfg.WatchNodes {
		b.nodes = coreinformers.NewNodeInformer(cfg.Client, cfg.Resync, cache.Indexers{})
		b.rooms = newRooms()
	}
	if cfg.Disks {
		b.disks = newDisks(cfg)
	}
	if cfg.Budgets {
		b.budgets = newBudgets(cfg)
	}
	return b
}

// Start watches the server pods (and nodes) and calls notify with the owning VM of each pod that
// changes, and of each pod on a node whose readiness changes.
func (b *Backend) Start(ctx context.Context, notify func(types.NamespacedName)) (func() bool, error) {
	owner := func(obj any) { notifyVM(obj, notify) }
	// synced follows the handlers, not only the caches: the plain informer counts an item of
	// its initial list done once its handler has had it, so every VM with a pod has been
	// notified by the time the caller starts its workers.
	b.notify = notify
	go b.podsCtrl.RunWithContext(ctx)
	synced := []cache.InformerSynced{b.podsCtrl.HasSynced}

	if b.nodes != nil {
		if err := b.nodes.SetTransform(toNode); err != nil {
			return nil, fmt.Errorf("set node transform: %w", err)
		}
		onNode := func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			n, ok := obj.(*corev1.Node)
			if !ok {
				return
			}
			objs, _ := b.pods.ByIndex(byNode, n.Name)
			for _, o := range objs {
				owner(o)
			}
		}
		nodesHandled, err := b.nodes.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			// A node made again under its name (deleted by hand, and its kubelet registered
			// it again before the pods on it were collected) is news to the VMs whose servers
			// its deletion made lost. The first list is not: every VM is looked at then anyway.
			AddFunc: func(obj any, isInInitialList bool) {
				if n, ok := obj.(*corev1.Node); ok {
					b.rooms.set(n.Name, n)
				}
				if !isInInitialList {
					onNode(obj)
				}
			},
			UpdateFunc: func(old, cur any) {
				o, c := old.(*corev1.Node), cur.(*corev1.Node)
				b.rooms.set(c.Name, c)
				if nodeReady(o) != nodeReady(c) || o.Spec.Unschedulable != c.Spec.Unschedulable {
					onNode(cur)
				}
			},
			DeleteFunc: func(obj any) {
				switch n := obj.(type) {
				case *corev1.Node:
					b.rooms.set(n.Name, nil)
				case cache.DeletedFinalStateUnknown:
					b.rooms.set(n.Key, nil) // a node has no namespace: its key is its name
				}
				onNode(obj)
			},
		})
		if err != nil {
			return nil, fmt.Errorf("watch nodes: %w", err)
		}
		b.rooms.synced = nodesHandled.HasSynced
		go b.nodes.RunWithContext(ctx)
		synced = append(synced, nodesHandled.HasSynced)
	}
	if b.budgets != nil {
		budgetsHandled, err := b.startBudgets(ctx, notify)
		if err != nil {
			return nil, err
		}
		synced = append(synced, budgetsHandled)
	}
	if b.disks != nil {
		disksHandled, err := b.startDisks(ctx, notify)
		if err != nil {
			return nil, err
		}
		synced = append(synced, disksHandled...)
	}
	return func() bool {
		for _, s := range synced {
			if !s() {
				return false
			}
		}
		return true
	}, nil
}

// vmHandlers are the event handlers of an informer of VMs' objects (pods, claims): each object
// added, changed (changed(old, cur)) or deleted notifies its VM, but the echo of the backend's
// own write of it.
func (b *Backend) vmHandlers(notify func(types.NamespacedName), changed func(old, cur any) bool) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if !b.echo(obj) {
				notifyVM(obj, notify)
			}
		},
		UpdateFunc: func(old, cur any) {
			if sameVersion(old, cur) {
				// A resync (--resync) hands the cached object over again as both, and a
				// relist the version the cache holds, decoded anew: no change, and no
				// echo either, which would let go of the entry of a write (created) whose
				// own echo is still to come, and queue its VM once more when it came.
				return
			}
			if !b.echo(cur) && changed(old, cur) {
				notifyVM(cur, notify)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				b.created.Delete(t.Key)
			} else {
				b.echo(obj)
			}
			notifyVM(obj, notify)
		},
	}
}

// sameVersion reports whether old and cur are one version of a pod or claim: the same
// object (a resync), or the version the cache holds handed over again (a relist).
func sameVersion(old, cur any) bool {
	if old == cur {
		return true
	}
	switch o := old.(type) {
	case *cachedPod:
		c, ok := cur.(*cachedPod)
		return ok && o.sameVersion(c)
	case *cachedClaim:
		c, ok := cur.(*cachedClaim)
		return ok && o.sameVersion(c)
	}
	return false
}

// notifyVM notifies the VM whose server or disk obj (or its tombstone) is, if it names one.
func notifyVM(obj any, notify func(types.NamespacedName)) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	var ns, vm string
	switch o := obj.(type) {
	case *cachedPod:
		ns, vm = o.namespace.String(), o.ownerName()
	case *cachedClaim:
		ns, vm = o.namespace.String(), o.vmName()
	}
	if vm != "" {
		notify(types.NamespacedName{Namespace: ns, Name: vm})
	}
}

// echo reports whether obj is the pod a Create of this backend made (or the claim one of its
// disk writes made), exactly as the write returned it: the reconcile that made it already
// decided on it (the controller's expectations hold it), so its arrival in the cache brings
// nothing new and the VM is not queued again for it. Any event of the object ends what is
// remembered of its write.
func (b *Backend) echo(obj any) bool {
	switch o := obj.(type) {
	case *cachedPod:
		rv, ok := b.created.LoadAndDelete(o.namespace.String() + "/" + o.name)
		return ok && o.hasVersion(rv.(string))
	case *cachedClaim:
		rv, ok := b.created.LoadAndDelete(o.namespace.String() + "/" + o.name)
		return ok && o.ids().version == rv.(string)
	}
	return false
}

// Observe returns vm's pod from the cache as a server; a pod of the same name that another VM
// (or an earlier VM of the same name) controls is reported only while it is being deleted, so
// that the controller waits for it rather than adopting it.
func (b *Backend) Observe(vm backend.Owner) (*backend.Server, error) {
	obj, ok, err := b.pods.GetByKey(vm.Namespace + "/" + PodName(vm.Name))
	if err != nil {
		return nil, fmt.Errorf("read pod cache: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return b.observed(obj.(*cachedPod), vm), nil
}

// Get reads vm's pod from the API server, past the cache (backend.Reader).
func (b *Backend) Get(ctx context.Context, vm backend.Owner) (*backend.Server, error) {
	pod, err := b.read(ctx, vm)
	if err != nil || pod == nil {
		return nil, err
	}
	srv := b.observed(cachePod(pod), vm)
	if _, labelled := pod.Labels[LabelVMUID]; srv != nil && !labelled {
		// The cache holds only the labelled pods (the watch selects on the label): one
		// whose label was taken off (by hand, by a tool) is owned by vm all the same.
		srv.Unwatched = true
	}
	return srv, nil
}

// read is vm's pod as the API server has it; nil when there is none.
func (b *Backend) read(ctx context.Context, vm backend.Owner) (*corev1.Pod, error) {
	pod, err := b.cfg.Client.CoreV1().Pods(vm.Namespace).Get(ctx, PodName(vm.Name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get pod %s: %w", PodName(vm.Name), err)
	}
	return pod, nil
}

// observed is vm's server as pod shows it; nil when the pod is another's and not going away.
func (b *Backend) observed(pod *cachedPod, vm backend.Owner) *backend.Server {
	if !pod.owns(vm) {
		if !pod.deleting() {
			return nil // not ours: Create reports the clash
		}
		return &backend.Server{Name: pod.name, ID: string(pod.podUID()), State: backend.StatePending, Detail: pod.detail(), Deleting: true}
	}
	var ready func(string) (bool, bool)
	if b.nodes != nil {
		ready = b.nodeReady
	}
	s := pod.observed(ready)
	b.cordoned(s)
	return s
}

func (b *Backend) nodeReady(name string) (ready, known bool) {
	obj, ok, err := b.nodes.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return false, false
	}
	return nodeReady(obj.(*corev1.Node)), true
}

// Create creates vm's pod. A pod of that name that vm already controls is returned as is; one
// that it does not control, and a pod the API server refuses, are ErrRejected, except when
// the refusal is only that the namespace is being deleted (a transient error).
func (b *Backend) Create(ctx context.Context, vm backend.Owner, spec backend.Spec) (*backend.Server, error) {
	pod := newPod(vm, spec)
	b.cfg.PodSecurity.secure(pod)
	client := b.cfg.Client.CoreV1().Pods(vm.Namespace)
	out, err := client.Create(ctx, pod, metav1.CreateOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		existing, err := client.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get existing pod %s: %w", pod.Name, err)
		}
		if !cachePod(existing).owns(vm) {
			return nil, fmt.Errorf("pod %s already exists and this VM does not control it: %w", pod.Name, backend.ErrRejected)
		}
		if existing.DeletionTimestamp != nil {
			// The old server is still going (the cache saw its deletion early, or not at
			// all): a transient error, so the create is retried once it is gone.
			return nil, fmt.Errorf("pod %s is still being deleted", pod.Name)
		}
		out = existing
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is being deleted, and the VM with it: not a refusal of this server,
		// so no Failed phase or Event and no retry: the VM's deletion comes next.
		return nil, fmt.Errorf("create pod %s: namespace %s is being deleted: %w", pod.Name, vm.Namespace, err)
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		if hint := b.cfg.PodSecurity.refusalHint(err); hint != "" {
			return nil, fmt.Errorf("create pod %s: %w: %w; %s", pod.Name, backend.ErrRejected, err, hint)
		}
		return nil, fmt.Errorf("create pod %s: %w: %w", pod.Name, backend.ErrRejected, err)
	default:
		return nil, fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	b.created.Store(out.Namespace+"/"+out.Name, out.ResourceVersion)
	s := serverOf(out)
	return &s, nil
}

// Delete deletes vm's pod, on the condition that it is still the pod the cache shows, so that
// a stale view never deletes a newer pod.
func (b *Backend) Delete(ctx context.Context, vm backend.Owner) error {
	return b.delete(ctx, vm, nil)
}

// DeleteGracefully deletes vm's pod with the grace period given (backend.GracefulDeleter):
// the pod's own terminationGracePeriodSeconds is overridden, as kubectl delete
// --grace-period does; 0 is kubectl's --force.
func (b *Backend) DeleteGracefully(ctx context.Context, vm backend.Owner, grace time.Duration) error {
	secs := int64(grace / time.Second)
	return b.delete(ctx, vm, &secs)
}

// delete deletes vm's pod, the one the cache shows, or, when it shows none, the one the API
// server has: a pod created a moment ago that the cache has not seen yet, or one whose label
// was taken off (which the cache never shows). Taken at the cache's word, such a pod was left
// running while its VM was let go. Only a pod vm owns is deleted, by its UID.
func (b *Backend) delete(ctx context.Context, vm backend.Owner, graceSeconds *int64) error {
	srv, err := b.Observe(vm)
	if err != nil {
		return err
	}
	if srv == nil {
		pod, err := b.read(ctx, vm)
		if err != nil || pod == nil {
			return err
		}
		if !cachePod(pod).owns(vm) {
			return nil // another's: not this VM's to delete
		}
		srv = &backend.Server{Name: pod.Name, ID: string(pod.UID)}
	}
	uid := srv.ID
	err = b.cfg.Client.CoreV1().Pods(vm.Namespace).Delete(ctx, srv.Name, metav1.DeleteOptions{
		Preconditions:      &metav1.Preconditions{UID: (*types.UID)(&uid)},
		GracePeriodSeconds: graceSeconds,
	})
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	case apierrors.IsForbidden(err) && !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause), apierrors.IsInvalid(err):
		// The role, or an admission policy, refuses it: retrying soon does not help.
		return fmt.Errorf("delete pod %s: %w: %w", srv.Name, backend.ErrRejected, err)
	}
	return fmt.Errorf("delete pod %s: %w", srv.Name, err)
}

// toNode keeps only a node's name, Ready condition, and what room.go makes it a host of: its
// labels, taints, cordon, and allocatable cpu and memory. Tombstones pass through.
func toNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels},
		Spec: corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints}}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := n.Status.Allocatable[r]; ok {
			if slim.Status.Allocatable == nil {
				slim.Status.Allocatable = corev1.ResourceList{}
			}
			slim.Status.Allocatable[r] = q
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			slim.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return slim, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
