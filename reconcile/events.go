package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// relatedServer is the related object of an Event about srv, vm's server: the server, at the
// version the Event speaks of; nil when there is no server, or the backend's servers are no
// Kubernetes objects (backend.Objects).
//
// client-go's recorder folds an Event into an earlier one that has the same type, reason,
// action, reporting controller and instance, regarding and related object, up to six minutes
// after the earlier one last occurred: it counts it in the earlier one's series, whose note
// stays. The note is not compared, so the related object is what tells apart the Events that
// say something new. Its UID gives each server Events of its own: a new server's
// CreatingServer, ServerReady or failure is not counted in its predecessor's. Its
// resourceVersion, the server's as the decision saw it (a created one's as the create
// returned it), gives each state of one server its own: a resize to another size, the
// ServerResized that follows, a failure told otherwise, each is said of a server that has
// changed since, and an object reference may name an object at a resourceVersion. That is
// the key of "the same outcome": an Event made again of the server as it was (a refusal asked
// again, a decision made again after a lost status write) says nothing new, and folds, its
// count growing. The regarding reference, the VM, leaves its resourceVersion out, which
// every status write changes: with it, nothing would ever fold. An Event of an action on the
// disk or the budget names that instead (relatedDisk, relatedBudget); one about nothing of
// the VM's (an invalid spec's) has no related object, and folds by its type and reason alone.
func (a applier) relatedServer(vm schema.VirtualMachine, srv *backend.Server) *corev1.ObjectReference {
	if srv == nil || a.opt.objects == nil {
		return nil
	}
	apiVersion, kind := a.opt.objects.ServerKind()
	return objectRef(vm, apiVersion, kind, srv.Name, srv.ID, srv.Version)
}

// objectRef is the reference to an object of vm's namespace: its server, disk or budget.
func objectRef(vm schema.VirtualMachine, apiVersion, kind, name, id, version string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: vm.Namespace(), Name: name,
		UID: types.UID(id), ResourceVersion: version}
}

// relatedDisk is the related object of an Event of an action on d, vm's disk: the disk, at
// the version the action was decided on; nil when there is none, or the backend's disks are
// no Kubernetes objects (backend.DiskObjects). It is to a disk's Events what relatedServer is
// to a server's: without it, every AdoptingDisk, ResizingDisk or CreatingDisk of a VM within
// six minutes of the first was counted in the first, whose note stayed (a growth to 70G shown
// as the one to 60G before it, an adoption as owned shown as the one as kept).
//
// The version is the one before the action, as the decision saw the disk (a created one's as
// the create returned it), not the one the action's write gave it. Each action on a disk is
// a write conditional on that version (Disks.UpdateDisk, DeleteDisk), so two different
// changes cannot both start from one version: each is an Event of its own. And the same
// action made again of the disk as it was (a create that finds the claim it made, a delete
// decided again on a disk already gone) says nothing new, and folds. A delete returns no
// version to take the one after from in any case.
func (a applier) relatedDisk(vm schema.VirtualMachine, d *backend.Disk) *corev1.ObjectReference {
	if d == nil || a.opt.diskObjects == nil {
		return nil
	}
	apiVersion, kind := a.opt.diskObjects.DiskKind()
	return objectRef(vm, apiVersion, kind, d.Name, d.ID, d.Version)
}

// relatedBudget is the related object of an Event of an action on b, vm's disruption budget:
// the budget, at the version the action started from (relatedDisk says why), or as a create
// returned it; nil when there is none, or the backend's budgets are no Kubernetes objects
// (backend.BudgetObjects). A budget made again after its deletion (the strategy Block set,
// unset and set again) is another object: its CreatingBudget is an Event of its own.
func (a applier) relatedBudget(vm schema.VirtualMachine, b *backend.Budget) *corev1.ObjectReference {
	if b == nil || a.opt.budgetObjects == nil {
		return nil
	}
	apiVersion, kind := a.opt.budgetObjects.BudgetKind()
	return objectRef(vm, apiVersion, kind, b.Name, b.ID, b.Version)
}

// recordRelated records events on vm, each naming related as its related object (nil: none).
func (a applier) recordRelated(vm schema.VirtualMachine, related *corev1.ObjectReference, evs ...decision.Event) {
	if a.recorder == nil {
		return
	}
	// The reference leaves out the resourceVersion: with it, every event of a VM would be
	// about a different object, and repeats would never fold into one series.
	ref := &corev1.ObjectReference{APIVersion: vm.APIVersion(), Kind: vm.Kind(), Namespace: vm.Namespace(), Name: vm.Name(), UID: vm.UID()}
	var rel runtime.Object // none: nil itself, not a nil *ObjectReference, which is no nil object
	if related != nil {
		rel = related
	}
	for _, e := range evs {
		if e == (decision.Event{}) {
			continue // an action without one (recording a kind)
		}
		// A message past the note's limit loses its middle, not its end, which says what to
		// do: a command cut mid-name (kubectl vm restart NAME -n NS) could act on another VM.
		a.recorder.Eventf(ref, rel, e.Type, e.Reason, eventAction(e.Reason), "%s", decision.Abridge(e.Message, eventNoteLimit))
	}
}

// WarningsOnly records the Warning events of r and drops the Normal ones (CreatingServer,
// ServerReady and the like). Every event is an object the API server writes to etcd; at many
// VMs, two Normal events per VM brought to Active are a measurable part of what the API server
// does (docs/dev/benchmarks.md), while the status already says the same. What went wrong (a failed or
// missing server, an invalid spec, a lost node) is still recorded.
func WarningsOnly(r events.EventRecorder) events.EventRecorder { return warningsOnly{r} }

type warningsOnly struct{ r events.EventRecorder }

func (w warningsOnly) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if eventtype == decision.EventWarning {
		w.r.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
}

// goneNamespaceFor is how long Events for a namespace the API server called terminating are
// dropped without a request: a namespace's deletion takes seconds to minutes, and one that
// lingers (a finalizer of someone else's) is asked again after this.
const goneNamespaceFor = time.Minute

// SkipTerminatingNamespaces is sink, but for the Events of a namespace being deleted. The API
// server refuses to create anything there; a namespace deleted with many VMs in it took one
// refused create and one ERROR line of the events library per VM, as its servers went
// (ServerMissing) before its VMs did. The first refusal marks the namespace for
// goneNamespaceFor: its Events are dropped meanwhile without a request, each refusal is
// answered as a success (the Event could never be stored, and is not an error of the
// controller's), and the namespace is logged once, at debug level.
func SkipTerminatingNamespaces(sink events.EventSink, log *slog.Logger, now func() time.Time) events.EventSink {
	return &skipTerminating{sink: sink, log: log, now: now, gone: map[string]time.Time{}}
}

type skipTerminating struct {
	sink events.EventSink
	log  *slog.Logger
	now  func() time.Time
	mu   sync.Mutex
	gone map[string]time.Time // namespace -> until when its Events are dropped
}

func (s *skipTerminating) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.send(e, func() (*eventsv1.Event, error) { return s.sink.Create(ctx, e) })
}

func (s *skipTerminating) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.send(e, func() (*eventsv1.Event, error) { return s.sink.Update(ctx, e) })
}

func (s *skipTerminating) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return s.send(old, func() (*eventsv1.Event, error) { return s.sink.Patch(ctx, old, data) })
}

// send makes the request unless e's namespace is known to be going, and notes the namespace
// when the API server says it is.
func (s *skipTerminating) send(e *eventsv1.Event, request func() (*eventsv1.Event, error)) (*eventsv1.Event, error) {
	ns := e.Namespace
	s.mu.Lock()
	until, known := s.gone[ns]
	if known && s.now().After(until) {
		delete(s.gone, ns)
		known = false
	}
	s.mu.Unlock()
	if known {
		return e, nil
	}
	out, err := request()
	if !namespaceGoing(err) {
		return out, err
	}
	s.mu.Lock()
	_, noted := s.gone[ns]
	s.gone[ns] = s.now().Add(goneNamespaceFor)
	s.mu.Unlock()
	if !noted {
		s.log.Debug("Namespace is being deleted: dropping its Events", "namespace", ns, "for", goneNamespaceFor)
	}
	return e, nil
}
