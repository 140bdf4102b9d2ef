package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// fieldManager names the controller in managedFields.
const fieldManager = "vm-controller"

// applier carries out plans: it is the only code that acts on servers and the only writer of a
// VM's finalizers and of the status a decision makes. The usage poller (poller.go) is the one
// other writer of a VM: it patches the usage fields and the UsageReported condition, nothing
// else.
type applier struct {
	writer   vmWriter
	fields   schema.Fields
	backend  backend.Backend
	opt      optional // backend's optional interfaces (optionalOf)
	recorder events.EventRecorder
	expect   *expectations
	disks    *diskExpectations
	policy   decision.Policy
	now      func() time.Time
	// route says where status writes go: /status, or the main resource (statusroute.go).
	route statusRoute
	// notKept holds the statuses the API server did not keep as sent, which are not sent
	// again at the version it answered (unkept.go). nil: none is remembered.
	notKept *notKept
	// log takes what a plan carries on past: a refusal of bookkeeping that changes nothing
	// the VM's owner sees (recording a kind). nil: nothing is logged.
	log *slog.Logger
}

// warnRefused logs a refused write that the plan carries on past, with the VM's key.
func (a applier) warnRefused(vm schema.VirtualMachine, what string, err error) {
	if a.log != nil {
		a.log.Warn("Write refused; carrying on without it", "vm", vm.Namespace()+"/"+vm.Name(), "write", what, "err", err)
	}
}

// apply carries out plan for the VM seen as vm, in the order that keeps
// the guarantees: the finalizer is on before a server (or a disk) exists, a disk exists before
// the server that mounts it, a server replaced for the spec's sake is deleted only once the
// status says so (StatusFirst), and the finalizer comes off only after the server is gone and
// the disk deleted or released. Every write is conditional on the resourceVersion the decision saw (and
// the ones its own writes produce), so a decision made on a stale view fails with a conflict
// and is made again, rather than overwriting newer state. The plan is taken as decided on vm,
// observed and disk, with no server gone while disrupted and no disruption budget (the
// decision.Input's Gone and Budget nil); applyPlan takes the whole input.
func (a applier) apply(ctx context.Context, vm schema.VirtualMachine, owner backend.Owner, observed *backend.Server, disk *backend.Disk, plan decision.Plan) (time.Duration, error) {
	out, err := a.applyPlan(ctx, decision.Input{VM: vm, Server: observed, Disk: disk}, owner, plan)
	return out.after, err
}

// applied is what carrying out a plan left: when to look again, the VM as the last write
// returned it (nil when there was no write of the VM, or the VM may be gone), the
// resourceVersion of each write of the VM, in order, and whether the plan carried out took
// the finalizer off (with no error, it came off). The plan decided may have asked for that
// and been replaced on the way, by a refusal of its disk's release (DiskReleaseRefused).
type applied struct {
	after     time.Duration
	last      *written
	written   []string
	releasing bool
	// unkept: the API server did not keep the status written as it was sent (unkept), and a
	// decision on its answer would send it again; or the status, which the API server did not
	// keep at this version before, was not sent (notKept).
	unkept bool
}

// applyPlan is apply, with what the writes returned, so that the caller can carry on from the
// VM as it now is instead of waiting for the informer to bring it back. in is what the plan was
// decided on: a refusal is decided on it too (Rejected, DiskRejected, a growth refused), so
// that it keeps what the plan refused began, at the time the refusal comes (refusing), not
// in.Now.
func (a applier) applyPlan(ctx context.Context, in decision.Input, owner backend.Owner, plan decision.Plan) (applied, error) {
	vm, observed := in.VM, in.Server
	key := cache.NewObjectName(owner.Namespace, owner.Name)
	rv := vm.ResourceVersion()
	var out applied
	if plan.Finalizer == decision.AddFinalizer {
		w, err := a.setFinalizer(ctx, vm, rv, true)
		if err != nil {
			return out, err
		}
		rv = w.rv
		out.last, out.written = w, append(out.written, rv)
	}
	if plan.Disk != nil {
		if takesDisk(plan.Disk) {
			// A disk's delete cannot be undone, nor can an adoption that makes the VM its
			// owner once the VM is gone (the garbage collector deletes a disk whose owner
			// is gone); both come before any write of the VM that is conditional on the
			// resourceVersion decided on. The VM is first made sure to be still as decided
			// on (asDecided): so that a reclaim policy changed since (Retain, set while the
			// VM was Terminating) is not overridden by the cache's older Delete, and a disk
			// is not given to a VM deleted since, whose name a new VM may have taken and
			// the disk kept for (a cache behind the API server: a new leader's, a VM
			// informer that lags the claims').
			w, err := a.asDecided(ctx, vm, rv)
			switch {
			case apierrors.IsNotFound(err):
				// Gone, its finalizer taken off by someone else: nothing more to do, and
				// no policy left to read; the disk is left as it is.
				return applied{written: out.written}, nil
			case err != nil:
				return out, err
			case w.rv != rv:
				// Written after all: an admission policy changed the VM on this update (one
				// that sets a reclaim policy on VMs that name none, say), or the CRD gained a
				// default since the VM was stored. The plan was decided on the VM without
				// that change, which may say Retain: nothing more of it is done, and the loop
				// decides next on the VM as this write returned it.
				out.last, out.written = &w, append(out.written, w.rv)
				return out, nil
			}
		}
		decidedOn, err := a.applyDisk(ctx, in, owner, &plan)
		if namespaceGoing(err) {
			// As for the server's create below: the namespace's deletion is the next
			// change to act on.
			return applied{written: out.written}, nil
		} else if err != nil {
			return out, err
		}
		// A refusal of the server below is decided on the disk the plan now is decided
		// on: the disk as the plan would leave it, or, its growth refused, as it is.
		in.Disk = decidedOn
	}
	var created *backend.Server // the server the plan made, if it made one
	if plan.Server != nil {
		switch plan.Server.Op {
		case decision.CreateServer:
			srv, err := a.backend.Create(ctx, owner, *plan.Server.Spec)
			switch {
			case errors.Is(err, backend.ErrRejected):
				plan = a.policy.Rejected(a.refusing(in), err.Error())
			case namespaceGoing(err):
				// The VM's namespace is being deleted, and the VM with it: no server can be
				// made there any more, and the VM's own deletion, which the namespace's
				// brings, is the next change to act on. Not an error to retry: in a
				// namespace's teardown, whose pods go before its VMs, every VM's retries
				// queued behind each other in the overall retry bucket. Nothing to decide
				// on after it either.
				return applied{written: out.written}, nil
			case err != nil:
				return out, fmt.Errorf("create server: %w", err)
			default:
				a.expect.created(key, srv)
				plan.Created(srv)
				created = srv
				a.recordAbout(vm, srv, plan.Server.Event)
			}
		case decision.DeleteServer:
			if plan.Server.StatusFirst && plan.Status != nil {
				break // after the status write, below
			}
			err := a.removeServer(ctx, vm, owner, observed, plan)
			switch {
			case errors.Is(err, backend.ErrRejected):
				// Refused for a reason retrying soon does not fix (the controller's role, an
				// admission policy): the status says so, instead of the error backoff with
				// the status as it was (ServerDeleteRefused).
				plan = a.policy.ServerDeleteRefused(a.refusing(in), err.Error())
			case err != nil:
				return out, err
			}
		case decision.ResizeServer:
			if a.opt.resizer == nil {
				return out, errors.New("resize server: the backend cannot resize in place")
			}
			_, err := a.opt.resizer.Resize(ctx, owner, *plan.Server.Spec)
			switch {
			case errors.Is(err, backend.ErrResizeInfeasible):
				on, rerr := a.resizeRefused(ctx, in, owner)
				if rerr != nil {
					return out, rerr
				}
				plan = a.policy.ResizeRefused(on, err.Error())
			case err != nil:
				return out, fmt.Errorf("resize server: %w", err)
			default:
				a.recordAbout(vm, observed, plan.Server.Event)
			}
		}
	}
	// A budget that fails (refused by a policy, a name another holds, a transient error) is
	// retried with backoff, after the status: the server's action is done, and the status that
	// records it (a request acted on, failures counted) must not wait for the budget, or every
	// retry would act on the server again. On the way out, a delete refused for good lets the
	// VM go (applyBudget).
	budgetErr := a.applyBudget(ctx, vm, owner, plan.Budget, plan.Finalizer == decision.RemoveFinalizer)
	switch {
	case plan.Status != nil && !statusFirst(plan) && a.notKept.again(key, rv, *plan.Status):
		// The API server did not keep this status at rv (notKept): sent again, it would not
		// keep it either. It stands there but for what the CRD prunes, as do the Events that
		// went with it when it was sent.
		out.unkept = true
		a.expect.replaced.written(key, *plan.Status)
	case plan.Status != nil:
		// The patch holds the status and the resourceVersion precondition only, so that
		// through the main resource too it cannot touch the spec or the finalizers.
		patch, err := a.route.statusPatch(a.fields, vm, *plan.Status, rv)
		if err != nil {
			return out, fmt.Errorf("render status: %w", err)
		}
		w, err := a.writer.patch(ctx, owner.Namespace, owner.Name, patch, a.route.subresources()...)
		if apierrors.IsNotFound(err) {
			return applied{}, nil
		}
		if err != nil {
			return out, fmt.Errorf("write status: %w", err)
		}
		out.unkept = a.noteUnkept(key, patch, rv, w)
		rv = w.rv
		out.last, out.written = &w, append(out.written, rv)
		a.expect.replaced.written(key, *plan.Status)
		a.recordAbout(vm, named(plan.Status.Server, created, observed), plan.Events...)
		if statusFirst(plan) {
			// The status says the server is being replaced: now it may go.
			err := a.removeServer(ctx, vm, owner, observed, plan)
			switch {
			case errors.Is(err, backend.ErrRejected):
				// Refused for good (ServerDeleteRefused): said now, in a second write, as
				// a delete before its status says it in the first, not after an error
				// backoff with the status saying the server is being replaced.
				on := a.refusing(in)
				on.VM = w.view(a.fields) // the refusal's status follows the one just written
				plan = a.policy.ServerDeleteRefused(on, err.Error())
				if err := a.writeRefusal(ctx, vm, owner, observed, plan, &out); err != nil {
					return out, err
				}
				rv = out.last.rv
			case err != nil:
				return out, err
			}
		}
	}
	if budgetErr != nil {
		// The finalizer stays until the budget's action is done, or refused for good. The
		// plan's time to look again stands beside the error's backoff: a failed server's
		// backoff, a bound after which a stuck one is Stalled, are the server's, and a budget
		// refused at every try must not put them off to the error backoff's ceiling.
		out.after = time.Duration(plan.RequeueAfter)
		return out, budgetErr
	}
	if plan.Finalizer == decision.RemoveFinalizer {
		// The VM may be gone once its last finalizer is: nothing to carry on from.
		out.last, out.releasing = nil, true
		if _, err := a.setFinalizer(ctx, vm, rv, false); err != nil {
			return out, err
		}
	}
	out.after = time.Duration(plan.RequeueAfter)
	return out, nil
}

// refusing is in, what a plan was decided on, at the time a refusal of it comes: the plan of a
// backend's refusal is decided on the world the plan refused was, at the applier's clock.
func (a applier) refusing(in decision.Input) decision.Input {
	in.Now = a.now()
	return in
}

// resizeRefused is what the refusal of a resize (backend.ErrResizeInfeasible) is decided on:
// in at the time of the refusal (refusing), with the nodes the VM's disk can be reached from
// (reach), which the decision's room check counts alone (decision.Policy.ResizeRefused). A
// resize replaces no server, so the round read none (reached); decided without them, a zonal
// disk with no room in its zone was told its server would be replaced, which the next round,
// reading them, took back and kept the server. An error leaves the refusal to the next try:
// the resize refused changed nothing.
func (a applier) resizeRefused(ctx context.Context, in decision.Input, owner backend.Owner) (decision.Input, error) {
	in, _, err := reach(ctx, a.opt.pinning, a.policy.RootDisk, in, owner)
	if err != nil {
		return in, fmt.Errorf("read the nodes the disk can be reached from after the resize was refused: %w", err)
	}
	return a.refusing(in), nil
}

// writeRefusal writes the status of plan, the refusal of a delete made after its status
// (ServerDeleteRefused), at the resourceVersion that write returned (out.last), and records
// its Events. A VM gone meanwhile leaves nothing to write.
func (a applier) writeRefusal(ctx context.Context, vm schema.VirtualMachine, owner backend.Owner, observed *backend.Server, plan decision.Plan, out *applied) error {
	if plan.Status == nil {
		return nil
	}
	patch, err := a.route.statusPatch(a.fields, out.last.view(a.fields), *plan.Status, out.last.rv)
	if err != nil {
		return fmt.Errorf("render status: %w", err)
	}
	w, err := a.writer.patch(ctx, owner.Namespace, owner.Name, patch, a.route.subresources()...)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	key := cache.NewObjectName(owner.Namespace, owner.Name)
	out.unkept = a.noteUnkept(key, patch, out.last.rv, w)
	out.last, out.written = &w, append(out.written, w.rv)
	a.expect.replaced.written(key, *plan.Status)
	a.recordAbout(vm, observed, plan.Events...)
	return nil
}

// unkept reports whether the API server did not keep the status patch sent, conditional on
// resourceVersion rv, as w, its answer, shows: a CRD that lacks a field the patch sets prunes
// it (a CRD older than the controller, not read under --watch-crd=false). Through the status
// subresource such a write, once it moves nothing but the pruned field, is stored as no
// change: the answer keeps rv. Through the main resource every status write claims a new
// generation and is stored, so the status read back from the patch is compared with the
// answer's: a cost paid only on that route.
func (a applier) unkept(patch []byte, rv string, w written) bool {
	if w.rv == rv {
		return true
	}
	if !a.route.main {
		return false
	}
	sent := schema.ViewOf(patch, w.rv, a.fields).Status()
	return !sent.SameAs(w.view(a.fields).Status())
}

// noteUnkept reports whether the API server did not keep the status patch sent to the VM of
// key, conditional on rv, as w, its answer, shows (unkept), and notes such a status for the
// VM's next decisions at the answer's version (notKept); a status kept forgets an earlier
// note.
func (a applier) noteUnkept(key cache.ObjectName, patch []byte, rv string, w written) bool {
	if !a.unkept(patch, rv, w) {
		a.notKept.forget(key)
		return false
	}
	// The status as sent, claimed generation and all: what the answer would hold had the
	// API server kept it, and so what the next decision on the answer makes again.
	a.notKept.note(key, w.rv, schema.ViewOf(patch, w.rv, a.fields).Status())
	return true
}

// statusFirst reports whether plan deletes the VM's server once its status says so
// (decision.ServerAction.StatusFirst).
func statusFirst(plan decision.Plan) bool {
	s := plan.Server
	return s != nil && s.Op == decision.DeleteServer && s.StatusFirst && plan.Status != nil
}

// takesDisk reports whether the disk action act cannot be undone should the VM not be as the
// plan was decided on: a delete, or an adoption that makes the VM the disk's owner (one as
// kept only labels the disk for the VM, which a later VM of the name adopts again).
func takesDisk(act *decision.DiskAction) bool {
	return act.Op == decision.DeleteDisk || act.Op == decision.AdoptDisk && act.Spec != nil && !act.Spec.Keep
}

// removeServer deletes the VM's server as plan asks (DeleteServer), observed being the server
// the plan was decided on, remembers the delete until the cache shows it, and records the
// plan's Event for it.
func (a applier) removeServer(ctx context.Context, vm schema.VirtualMachine, owner backend.Owner, observed *backend.Server, plan decision.Plan) error {
	if err := a.deleteServer(ctx, owner, plan.Server.GracePeriod); err != nil {
		return fmt.Errorf("delete server: %w", err)
	}
	if observed != nil {
		key := cache.NewObjectName(owner.Namespace, owner.Name)
		a.expect.deleted(key, observed.ID)
		if !plan.Server.StatusFirst && plan.Status != nil && plan.Status.Phase == schema.PhaseCreating {
			// A new server follows: remembered until the status says so, should the status
			// write after this delete be lost (replaced.go). A delete after its status
			// (StatusFirst) has nothing to remember: the status says so already.
			a.expect.replaced.deleted(key, owner.UID, observed)
		}
	}
	a.recordAbout(vm, observed, plan.Server.Event)
	return nil
}

// recordAbout records events on vm about srv, its server as the events speak of it (nil:
// none), which each names as its related object (relatedServer says why).
func (a applier) recordAbout(vm schema.VirtualMachine, srv *backend.Server, evs ...decision.Event) {
	a.recordRelated(vm, a.relatedServer(vm, srv), evs...)
}

// named is the server that st, the server a status names, is: of servers, the one of its
// ID, as the plan found or made it; one of its name and ID only, of no known version, when
// none is; nil when the status names none.
func named(st *schema.ServerStatus, servers ...*backend.Server) *backend.Server {
	if st == nil || st.ID == "" {
		return nil
	}
	for _, s := range servers {
		if s != nil && s.ID == st.ID {
			return s
		}
	}
	return &backend.Server{Name: st.Name, ID: st.ID}
}

// eventNoteLimit is the most bytes an Event's note may hold: the events.k8s.io/v1 API
// refuses a longer one (its NoteLengthLimit), and the recorder, which sends Events in the
// background, would only log the refusal. An invalid spec's message, which lists every
// field error, passes it easily; the status keeps the whole message.
const eventNoteLimit = 1024

// finalizerPatch is a merge patch of the finalizers, conditional on a resourceVersion: a
// struct rather than nested maps, so that rendering it allocates little.
type finalizerPatch struct {
	Metadata struct {
		Finalizers      []string `json:"finalizers"`
		ResourceVersion string   `json:"resourceVersion"`
	} `json:"metadata"`
}

// setFinalizer adds or removes the controller's finalizer, keeping everyone else's, and
// returns the VM as the write left it (nil when it was already gone).
func (a applier) setFinalizer(ctx context.Context, vm schema.VirtualMachine, rv string, add bool) (*written, error) {
	var p finalizerPatch
	p.Metadata.Finalizers = []string{}
	for _, f := range vm.Finalizers() {
		if f != schema.Finalizer {
			p.Metadata.Finalizers = append(p.Metadata.Finalizers, f)
		}
	}
	if add {
		p.Metadata.Finalizers = append(p.Metadata.Finalizers, schema.Finalizer)
	}
	p.Metadata.ResourceVersion = rv
	patch, err := json.Marshal(&p)
	if err != nil {
		return nil, fmt.Errorf("render finalizers: %w", err)
	}
	out, err := a.writer.patch(ctx, vm.Namespace(), vm.Name(), patch)
	if apierrors.IsNotFound(err) && !add {
		return nil, nil
	}
	if err != nil {
		verb := "remove"
		if add {
			verb = "add"
		}
		return nil, fmt.Errorf("%s finalizer: %w", verb, err)
	}
	return &out, nil
}

// eventAction is the action field of an events.k8s.io Event: what the controller did.
func eventAction(reason string) string {
	if action, ok := diskEventActions[reason]; ok {
		return action
	}
	switch reason {
	case decision.ReasonCreatingServer:
		return "CreateServer"
	case decision.ReasonDeletingServer, decision.ReasonReplacingServer, decision.ReasonRestartingServer, decision.ReasonServerRestarted,
		decision.ReasonStartingServer, decision.ReasonStoppingServer:
		return "DeleteServer"
	case decision.ReasonResizingServer:
		return "ResizeServer"
	default:
		return "UpdateStatus"
	}
}

// namespaceGoing reports whether a create was refused because the VM's namespace is being
// deleted.
func namespaceGoing(err error) bool {
	return err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// deleteServer deletes the VM's server, with the grace period a stop asked for where the
// backend can honour one (backend.GracefulDeleter); nil grace: the backend's default.
func (a applier) deleteServer(ctx context.Context, owner backend.Owner, grace *decision.Duration) error {
	if a.opt.graceful != nil && grace != nil {
		return a.opt.graceful.DeleteGracefully(ctx, owner, time.Duration(*grace))
	}
	return a.backend.Delete(ctx, owner)
}
