package decision

import (
	"fmt"
	"strings"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The eviction strategies (docs/eviction.md): what a node's drain, which evicts the server
// pods on the node through the eviction API, does to a VM.
//
//   - None: the eviction takes the server like any pod's. The controller finds it gone and
//     answers as it answers any server that went without it (an active VM gets a new one,
//     with the Warning ServerMissing).
//   - Replace: the controller sees the eviction coming (backend.Server.Disruption, the pod's
//     DisruptionTarget condition) and says so (ServerEvicted, the condition Moving); once
//     the old server is gone, and not before (one server at a time, on the same disk), it
//     creates the new one at once, with no failure counted and no backoff; once that one is
//     ready, Moving goes with the Event ServerMoved. The new server prefers any node but the
//     one the old one was evicted from (backend.Spec.PreferAvoidNode): a drain cordoned that
//     node, but an eviction that is no drain (a descheduler, a kubelet under pressure, the
//     eviction API called by hand) leaves it schedulable. Only prefers: a VM whose placement
//     admits that node only must still run, and a move under Replace has no bound after
//     which it gives up, as a migration has.
//   - Block: a disruption budget (backend.Budgets: a PodDisruptionBudget) keeps the server
//     from being evicted, so a drain waits; while the server's node is cordoned and the
//     server runs (a Pending or ended pod is evicted without the budget being asked), or
//     ended in a pod that runs on (backend.Server.Lingers), the condition EvictionBlocked
//     and a Warning say which VM holds the drain and how to let it go, once the budget is
//     seen (budgetHolds). The budget goes when the strategy changes,
//     and with the VM: on its way out (deleting) the controller deletes it, for a deletion
//     that orphans the VM's dependents (kubectl delete --cascade=orphan) would leave it behind. One an earlier VM of the name left all
//     the same (backend.Budget.Unowned) is adopted under Block, and otherwise left alone.

// Conditions of the eviction strategies, present (True) only while they hold.
const (
	// ConditionMoving: the server was evicted and the VM is moving to a new server, on
	// another node if one fits (Replace).
	ConditionMoving = "Moving"
	// ConditionEvictionBlocked: the server's node is cordoned (being drained) and the VM's
	// budget keeps the server from being evicted (Block).
	ConditionEvictionBlocked = "EvictionBlocked"
)

// migrateHint is how a user moves a VM off a node, or frees the node by stopping it.
func (d *decision) migrateHint() string {
	return "move it with: " + d.plugin("migrate") + " (or stop it)"
}

// lostBlockHint is EvictionBlocked's way out for a server whose node (%s) does not answer.
const lostBlockHint = "its node does not answer, so it can neither be moved nor stopped until the node comes back; if the node is down for good: kubectl delete node %s"

// BudgetOp is an operation on a VM's disruption budget.
type BudgetOp string

// The budget operations.
const (
	CreateBudget BudgetOp = "create"
	// AdoptBudget makes the VM's a budget of its name an earlier VM left controlled by
	// nothing (backend.Budgets.AdoptBudget).
	AdoptBudget BudgetOp = "adopt"
	// RecordBudgetKind has the VM's own budget, which an earlier version made without it,
	// record the kind of resource the VM is (backend.Budgets.RecordBudgetKind), so that if it
	// is left behind no object of another kind adopts it. Once: the budget then records it.
	RecordBudgetKind BudgetOp = "record-kind"
	DeleteBudget     BudgetOp = "delete"
)

// BudgetAction is one operation on the VM's disruption budget (backend.Budgets).
type BudgetAction struct {
	Op BudgetOp `yaml:"op"`
	// Name is the budget an adoption or a delete acts on, as observed; "" for a create (the
	// backend names the budget it makes).
	Name string `yaml:"name,omitempty"`
	// Event says why; it is recorded as soon as the operation succeeds. RecordBudgetKind
	// has none: it is bookkeeping that changes nothing the VM's owner sees, and it would
	// come once for every Block VM of an earlier version.
	Event Event `yaml:"event,omitempty"`
}

// evictionPart is the eviction strategy's part of a decision: the budget observed, the
// strategy in force, and the conditions Moving and EvictionBlocked (nil drops them). gone is
// the server the backend remembers going while disrupted (nil unless there is no server);
// evictedGone is gone when this decision takes it for the eviction of the server the status
// names (goneEvicted). Decide and refused set it up (eviction); a migration reads the move
// under way (migrate.go), and a stop ends it (stopServer).
type evictionPart struct {
	budget          *backend.Budget
	strategy        schema.EvictionStrategy
	moving, blocked *lifecycleCondition
	// budgetUnseen: the plan of a backend's refusal (refused), made without the budget the
	// VM has; whether it holds a drain is read from the status (budgetHolds).
	budgetUnseen      bool
	gone, evictedGone *backend.Gone
}

// evictionStrategy is the strategy in force for a VM of spec: its own, else the policy's.
func (p Policy) evictionStrategy(spec schema.Spec) schema.EvictionStrategy {
	switch {
	case spec.EvictionStrategy != "":
		return spec.EvictionStrategy
	case p.Eviction != "":
		return p.Eviction
	}
	return schema.EvictionNone
}

// eviction sets the strategy in force and asks for the budget it needs: one while the
// strategy is Block (whether or not the VM runs, so that starting it is never a window
// without one), none otherwise. A budget an earlier VM of the name left (Unowned) is adopted
// under Block and otherwise not touched: it is not the VM's. The VM's own budget that does
// not record its kind (KindUnrecorded: an earlier version made it) has it recorded under
// Block, the one case in which it stays. It also carries the Moving
// condition of a move under way while the VM is active under Replace.
func (d *decision) eviction(s schema.EvictionStrategy, active bool) {
	d.evict.strategy = s
	switch {
	case s == schema.EvictionBlock && d.evict.budget == nil:
		d.plan.Budget = &BudgetAction{Op: CreateBudget, Event: Event{Type: EventNormal, Reason: ReasonCreatingBudget,
			Message: "Creating a disruption budget for the server: a node's drain waits until the VM is moved or stopped (evictionStrategy Block)"}}
	case s == schema.EvictionBlock && d.evict.budget.Unowned:
		d.plan.Budget = &BudgetAction{Op: AdoptBudget, Name: d.evict.budget.Name, Event: Event{Type: EventNormal, Reason: ReasonAdoptingBudget,
			Message: fmt.Sprintf("Adopting disruption budget %s, which an earlier VM named %s left owned by nothing: "+
				"a node's drain waits until the VM is moved or stopped (evictionStrategy Block)", d.evict.budget.Name, d.vm.Name())}}
	case s == schema.EvictionBlock && d.evict.budget.KindUnrecorded:
		d.plan.Budget = &BudgetAction{Op: RecordBudgetKind, Name: d.evict.budget.Name}
	case s != schema.EvictionBlock && d.evict.budget != nil && !d.evict.budget.Unowned:
		d.plan.Budget = &BudgetAction{Op: DeleteBudget, Name: d.evict.budget.Name, Event: Event{Type: EventNormal, Reason: ReasonDeletingBudget,
			Message: fmt.Sprintf("Deleting disruption budget %s: evictionStrategy is %s", d.evict.budget.Name, s)}}
	}
	if s != schema.EvictionReplace || !active || d.restsStopped() {
		return // a stopped VM is not moved: a move under way ends with the stop
	}
	if c := d.current.Condition(ConditionMoving); c != nil && c.Status == schema.ConditionTrue {
		d.evict.moving = &lifecycleCondition{c.Reason, c.Message}
	}
	if d.goneEvicted() {
		// The eviction, seen only now that its server is gone: moved as if seen under way
		// (evicted), but for the server's deletion, done already. The status named that
		// server running or on its way, never evicted, so its eviction is news: in a move
		// under way too (the move's next server, evicted in turn), the message becomes its
		// own, as evicted makes it.
		g := d.evict.gone
		d.evict.evictedGone = g
		d.evict.moving = &lifecycleCondition{ReasonServerEvicted, evictedMessage(g.Name, g.Node, g.Disruption)}
	}
}

// goneEvicted reports whether the server the backend remembers going while disrupted (gone,
// backend.Departures) is the one the status names as running or on its way: a server evicted
// and deleted before any decision saw it being evicted (deleted at once, a kubelet that is
// quick, a controller busy or restarting in between). Without it the decision would read "no
// server" as a server deleted by someone else, and under Once and Manual stop the VM. The
// status must name that server (by its ID where both know one): once a decision has reported
// the VM otherwise, or a server came after it, what the backend remembers is no longer news.
// A server the status says is on a node that does not answer (NodeLost) is not moved, as
// evicted does not move it: it went with its node (nodelost.go), whatever marked it. Nor is
// one that went by the controller's delete alone (Replaced, with no disruption: replaced.go).
func (d *decision) goneEvicted() bool {
	g, cur := d.evict.gone, d.current
	if g == nil || d.srv != nil || cur.Reason == ReasonNodeLost || g.Replaced && g.Disruption == (backend.Disruption{}) {
		return false
	}
	return d.claimedGone(g)
}

// claimedGone reports whether g is the server the status names as running or on its way
// (ClaimedServer), by its ID where both know one.
func (d *decision) claimedGone(g *backend.Gone) bool {
	cur := d.current
	name := ClaimedServer(cur)
	return name != "" && name == g.Name && (cur.Server.ID == "" || g.ID == "" || cur.Server.ID == g.ID)
}

// evictedMessage says that server name was evicted from node (its node if "") for dis. It is
// the message of the condition Moving: written when an eviction is first seen, and kept word
// for word from then on, through the status of a refused create too, until the move ends or
// a server of the move is evicted in turn, whose eviction then gives it its own (evicted,
// eviction). So it always says the move's latest eviction, and is the move's record of the
// node its next server keeps off (evictedNode).
func evictedMessage(name, node string, dis backend.Disruption) string {
	why := dis.Reason
	if dis.Message != "" {
		why += ": " + dis.Message
	}
	if node == "" {
		return fmt.Sprintf("Server %s was evicted from its node (%s)", name, why)
	}
	return "Server " + name + evictedFromNode + node + " (" + why + ")"
}

// evictedFromNode is the words of evictedMessage before the node; neither a server's name nor
// a node's has a space in it.
const evictedFromNode = " was evicted from node "

// evictedNode is the node an evictedMessage names; "" when it names none.
func evictedNode(msg string) string {
	_, rest, ok := strings.Cut(msg, evictedFromNode)
	if !ok {
		return ""
	}
	node, _, _ := strings.Cut(rest, " ")
	return node
}

// deletingBudget asks, on a deleted VM's way out, for its budget to go before the finalizer
// comes off. The VM owns it, and the garbage collector deletes what a VM owns once the VM is
// gone; but a deletion that orphans the VM's dependents (kubectl delete --cascade=orphan)
// takes the owner reference off first, and the budget would stay, holding the name against
// the next VM of it. A budget holds no data, and the server it held is going with the VM: a
// delete the backend refuses for good does not hold the VM (BudgetLeftBehind).
func (d *decision) deletingBudget() {
	if d.evict.budget == nil || d.evict.budget.Unowned {
		return // none, or not the VM's
	}
	d.plan.Budget = &BudgetAction{Op: DeleteBudget, Name: d.evict.budget.Name, Event: Event{Type: EventNormal, Reason: ReasonDeletingBudget,
		Message: fmt.Sprintf("Deleting disruption budget %s before the VM is removed", d.evict.budget.Name)}}
}

// BudgetRefused is the Warning for a VM under Block whose budget, named budget, the backend
// refused to make (or adopt) for the reason why (a policy that denies budgets which block
// drains, a name another object holds, the controller's permissions): until it is made, nothing
// keeps a drain from evicting the server. The controller tries again with the error's backoff;
// repeats fold into one Event series.
func BudgetRefused(budget, why string) Event {
	which := "The VM's disruption budget" // a create's: the backend names it
	if budget != "" {
		which = "The disruption budget " + budget
	}
	return Event{Type: EventWarning, Reason: ReasonBudgetRefused, Message: fmt.Sprintf(
		"%s was refused (%s): until it is made, a drain of the server's node does not wait for the VM "+
			"(evictionStrategy Block); the controller tries again", which, why)}
}

// BudgetLeftBehind is the Warning for a deleted VM whose budget, named budget, the backend
// refused to delete on the VM's way out, for the reason why (the controller's permissions, a
// policy that protects budgets). The VM goes all the same: a budget holds no data, and what it
// held, the VM's server, is gone. The budget may stay, holding the name: a VM created again
// with it adopts the budget under Block, and leaves it alone otherwise.
func BudgetLeftBehind(vm schema.VirtualMachine, budget, why string) Event {
	return Event{Type: EventWarning, Reason: ReasonBudgetLeftBehind, Message: fmt.Sprintf(
		"The VM is removed, but its disruption budget %s was not deleted and may be left behind (%s): "+
			"a VM created again with the name %s adopts it under evictionStrategy Block; otherwise delete it by hand",
		budget, why, vm.Name())}
}

// evicted decides for an active VM whose server is being evicted under Replace, and reports
// whether it did. The server is not deleted by the controller while the eviction deletes it;
// one that the eviction ended without deleting (a node's own eviction leaves the pod Failed)
// is deleted now, without the backoff of a failure. Either way the next server is created
// once this one is gone (active, then moved).
func (d *decision) evicted() bool {
	srv := d.srv
	if d.evict.strategy != schema.EvictionReplace || srv == nil || srv.Disruption == nil || srv.State == backend.StateLost || d.failedFirst() {
		// A server on a node that does not answer is not moved: its deletion cannot finish
		// while the node may still run it with the disk (nodelost.go says so).
		return false
	}
	if d.evict.moving == nil || !d.evictionReported(srv) {
		// A move's message is its latest eviction's: that of a server of the move evicted in
		// turn (its next server, on a node that stays schedulable) replaces the one of the
		// server the move began with, once, when it is first seen.
		d.evict.moving = &lifecycleCondition{ReasonServerEvicted, evictedMessage(srv.Name, srv.Node, *srv.Disruption)}
	}
	if req := d.newMigration(); req != "" && srv.Node != "" {
		// The eviction's deletion carries a migrate request out, as any deletion under way
		// does (migrate): the next server keeps off the node.
		d.movingFrom(req, srv.Node)
	}
	going := srv
	if !srv.Deleting && (srv.State == backend.StateFailed || srv.State == backend.StateStopped) {
		d.deleteServer(ReasonReplacingServer, fmt.Sprintf("Replacing server %s: %s", srv.Name, d.evict.moving.message))
		going = d.deletingServer()
	}
	next := "a new server follows once it is gone, with the same disk"
	if srv.Node != "" {
		next += ", on another node if one fits" // moved: only preferred
	}
	d.report(schema.PhaseCreating, ReasonServerEvicted, d.evict.moving.message+"; "+next, going)
	return true
}

// evictionReported reports whether the status already says that srv is being evicted
// (ServerEvicted, naming this very server by its ID) with a condition Moving that names its
// node: Moving then says its eviction, and is kept word for word, whatever the disruption's
// words say since. A status written by a version that kept the first eviction's message for
// the whole move gets the message of the eviction it reports.
func (d *decision) evictionReported(srv *backend.Server) bool {
	cur := d.current
	return d.evict.moving != nil && cur.Reason == ReasonServerEvicted && cur.Server != nil && cur.Server.Name == srv.Name && cur.Server.ID == srv.ID &&
		evictedNode(d.evict.moving.message) == srv.Node
}

// failedFirst reports whether the server failed before it was evicted: the status already
// reports this very server failed and waiting out its backoff (backingOff). Its eviction (a
// descheduler's RemoveFailedPods, a drain: the eviction API takes ended pods too) moves no
// running VM; it deletes a failed server, which waits out the backoff as one deleted by hand
// does (waitOutBackoff). Taken for a move, it would make the next server at once and leave the
// failure uncounted, so that a server that fails at once would never back off for longer.
// Failed, or shut down cleanly: under Always one that shuts down again before it has been
// ready waits out the backoff as a failed one (restart), and is no more a running VM.
func (d *decision) failedFirst() bool {
	cur, srv := d.current.Server, d.srv
	return ended(srv) && d.backingOff() && cur != nil && cur.ID == srv.ID
}

// moved makes a create that follows an eviction say so, and keep the new server off the node
// the old one was evicted from if another node takes it (evictedFrom). A migrate request the
// eviction carries out keeps it off that node already, as a requirement (a.Spec.AvoidNode):
// off the migration's source node, which the Event names when it is not the node of the
// eviction the message says (a server of the move evicted in turn, from another node).
func (d *decision) moved(a *ServerAction) {
	if d.evict.moving == nil {
		return
	}
	where := ""
	if avoid := a.Spec.AvoidNode; avoid != "" {
		where = " on another node"
		if avoid != evictedNode(d.evict.moving.message) {
			where = " on a node other than " + avoid
		}
	} else if from := d.evictedFrom(); from != "" {
		a.Spec.PreferAvoidNode = from
		where = " on another node if one fits"
	}
	a.Event.Reason = ReasonMovingServer
	a.Event.Message = d.evict.moving.message + "; " + strings.ToLower(a.Event.Message[:1]) + a.Event.Message[1:] + where
}

// evictedFrom is the node the server of a move under Replace was evicted from, for the
// decision that creates the next one: the node the status gave the server when it reported
// the eviction (ServerEvicted), which the status keeps once the server is gone, or, for an
// eviction seen only once the server was gone (goneEvicted), the node the backend remembers.
// A status that says something else since (the backend refused the next server: Rejected,
// whose status names no server) still has the move's condition Moving, which every status of
// the move keeps until a server of the move is ready: the node it names, that of the move's
// latest eviction (evictedMessage), the one the refused create kept off. Without it a refused
// create was asked for again without the preference, and the next server could start on the
// node it was moved off. "" when there is no such move, or the node is not known.
func (d *decision) evictedFrom() string {
	cur := d.current
	switch {
	case d.evict.moving == nil || d.srv != nil:
		return ""
	case d.evict.evictedGone != nil:
		return d.evict.evictedGone.Node
	case cur.Reason == ReasonServerEvicted && cur.Server != nil && cur.Server.Node != "":
		return cur.Server.Node // "" in a layout with no place for it: the condition's message names it
	}
	return evictedNode(d.evict.moving.message)
}

// evictionConditions sets the conditions Moving and EvictionBlocked on a status being
// reported, with the Events of their changes: ServerMoved when the new server of a move is
// ready, DrainBlocked when a drain begins to wait for the VM.
func (d *decision) evictionConditions(conds []schema.Condition, gen int64, reason string) []schema.Condition {
	// The server the plan leaves: one this plan deletes (a migration, a restart, a stop) is
	// going, and neither moved here nor holding a drain.
	leaving := d.plan.Server != nil && d.plan.Server.Op == DeleteServer
	if d.stopsWith(reason) {
		// A move ends with a stop (eviction), in the decision that stops the VM: its new
		// server ended under a run strategy that keeps it so, say.
		d.evict.moving = nil
	}
	if d.evict.moving != nil && d.srv != nil && d.srv.State == backend.StateReady && !d.srv.Deleting && !leaving && d.srv.Disruption == nil {
		on := "its node"
		if d.srv.Node != "" {
			on = "node " + d.srv.Node
		}
		d.event(EventNormal, ReasonServerMoved, fmt.Sprintf("Server %s is running and ready on %s: %s", d.srv.Name, on, d.evict.moving.message))
		d.evict.moving = nil
	}
	d.evict.blocked = nil
	if d.evict.strategy == schema.EvictionBlock && d.budgetHolds() && d.srv != nil && d.srv.Cordoned && !d.srv.Deleting && !leaving && held(d.srv) {
		// The budget is not named: the pods backend names it NAME-block-eviction, and an
		// adopted one keeps its name.
		hint := d.migrateHint()
		switch {
		case ended(d.srv):
			hint = d.lingerHint(reason)
		case d.srv.State == backend.StateLost:
			// A migration of it is refused, and a stop waits for the node, as the server's
			// deletion does: what ends the wait is the node's, back or deleted.
			hint = fmt.Sprintf(lostBlockHint, d.srv.Node)
		}
		d.evict.blocked = &lifecycleCondition{ReasonDrainBlocked, fmt.Sprintf(
			"Node %s is cordoned, and the VM's disruption budget keeps server %s from being evicted (evictionStrategy Block): %s",
			d.srv.Node, d.srv.Name, hint)}
		if c := d.current.Condition(ConditionEvictionBlocked); c == nil || c.Status != schema.ConditionTrue {
			d.event(EventWarning, ReasonDrainBlocked, d.evict.blocked.message)
		}
	}
	conds = d.lifecycle(conds, ConditionMoving, d.evict.moving, gen)
	return d.lifecycle(conds, ConditionEvictionBlocked, d.evict.blocked, gen)
}

// budgetHolds reports whether the VM has a budget that holds its server: its own, observed.
// None (not made yet, deleted by someone, or refused: a policy, a name another object holds)
// holds nothing, and neither does one an earlier VM of the name left (Unowned), which selects
// that VM's server until it is adopted. The plan that asks for the budget does not claim it:
// the API server may refuse it, and the status written with the refusal, decided again at
// every retry, would say the drain waits while the drain evicts the server. The Warning
// BudgetRefused of each refusal says the server is unprotected; once the budget is made and
// seen, the next decision says it holds the drain. The plan of a backend's refusal (refused)
// is decided without the budget: it holds as the status says, which only a decision that saw
// the budget writes, so that a refusal neither drops the condition (its Warning would come
// again) nor claims it without a budget.
func (d *decision) budgetHolds() bool {
	if d.evict.budgetUnseen {
		c := d.current.Condition(ConditionEvictionBlocked)
		return c != nil && c.Status == schema.ConditionTrue
	}
	return d.evict.budget != nil && !d.evict.budget.Unowned
}

// held reports whether a budget keeps srv from being evicted: the eviction API asks the budget
// only for a pod that runs (or may run: on a node that does not answer); a Pending pod, or one
// that ended (Succeeded, Failed), it evicts at once, budget or not. A server that ended in a
// pod another container keeps Running (Lingers) is held as a running one: the pod is not
// terminal, and with its server ended it is not ready either, so the budget allows nothing.
func held(srv *backend.Server) bool {
	return running(srv) || srv.State == backend.StateLost || ended(srv) && srv.Lingers
}

// lingerHint is how a user lets a drain take a server that ended but lingers (held), for a
// status of reason; migrating is refused for a server that ended. One its run strategy keeps
// (stopsWith) stays until a stop deletes it, or a start deletes it and makes the next one, on
// a node other than the cordoned one. A failed one that waits out its backoff (retries) goes
// when the controller replaces it, or before, on a stop. Any other (kept beside a spec the
// controller refuses) goes when the controller deletes it.
func (d *decision) lingerHint(reason string) string {
	who, keeps := keeper(d.srv)
	why := fmt.Sprintf("the server has ended, but %s %s its pod running", who, keeps)
	switch {
	case d.stopsWith(reason):
		return fmt.Sprintf("%s, and runStrategy %s keeps the ended server: to free the node, %s", why, d.run.strategy, d.freeKept())
	case d.retries(reason):
		when := d.vm.Fields().NextRetryTime // where the VM's layout keeps it
		if when == "" {
			when = "the time the status's message gives" // a layout without the field
		}
		return fmt.Sprintf("%s until a new server replaces it after its backoff (%s): "+
			"to free the node before, stop the VM (%s)", why, when, d.plugin("stop"))
	}
	return fmt.Sprintf("%s until the controller deletes the server: to free the node, stop the VM (%s) "+
		"or fix what its status reports", why, d.plugin("stop"))
}

// lingersHeld is what the status of a VM whose ended server its run strategy keeps (ended)
// says of a server that lingers: the pod runs on, on its node, and holds the cpu and memory
// asked for it there, with no end but the owner's stop or start, drain or none. Without it
// the VM reads as stopped (or Failed) and its server's state as Running (the pod's phase), and
// nothing says that resources are held, nor how to free them.
func (d *decision) lingersHeld() string {
	srv := d.srv
	who, keeps := keeper(srv)
	on := "its node"
	if srv.Node != "" {
		on = "node " + srv.Node
	}
	held := "its cpu and memory"
	if !srv.Spec.CPU.IsZero() && !srv.Spec.Memory.IsZero() {
		held = fmt.Sprintf("its cpu (%s) and memory (%s)", srv.Spec.CPU.String(), srv.Spec.Memory.String())
	}
	return fmt.Sprintf("%s %s its pod running on %s, holding %s there: to free them, %s", who, keeps, on, held, d.freeKept())
}

// freeKept is how a user lets go of an ended server its run strategy keeps (stopsWith): a stop
// deletes it, or a start deletes it and makes the next one.
func (d *decision) freeKept() string {
	return fmt.Sprintf("stop the VM (%s) or start it again (%s), which replaces it", d.plugin("stop"), d.plugin("start"))
}

// keeper names what keeps a server that ended but lingers running, with the verb that goes
// with it: the containers the backend names (Server.KeptBy, in order of name), else a sidecar
// it cannot name. Past keepersNamed it names the first ones and counts the rest
// ("containers a, b, c and 4 more"): the message says what to do after the names, and an
// Event's note is cut at 1024 bytes, which a pod of many sidecars would pass before its end.
func keeper(srv *backend.Server) (who, keeps string) {
	names := srv.KeptBy
	switch n := len(names); {
	case n == 0:
		return "another container (a sidecar)", "keeps"
	case n == 1:
		return "container " + names[0], "keeps"
	case n > keepersNamed:
		return fmt.Sprintf("containers %s and %d more", strings.Join(names[:keepersNamed], ", "), n-keepersNamed), "keep"
	default:
		return "containers " + strings.Join(names[:n-1], ", ") + " and " + names[n-1], "keep"
	}
}

// keepersNamed is how many of the containers that keep a lingering server running its VM's
// messages name (keeper). Container names are DNS labels, up to 63 bytes: three of them
// leave the rest of an Event's note room.
const keepersNamed = 3

// replacing reports whether the server of a running VM is being moved under Replace: evicted,
// or gone after an eviction with the new one not yet ready. A move is carried out whatever the run
// strategy (an eviction is not the guest's choice), so the run strategies that heed requests
// hand such a VM to active (onRequest).
func (d *decision) replacing() bool {
	if d.evict.strategy != schema.EvictionReplace || d.restsStopped() || (d.srv != nil && d.srv.State == backend.StateLost) {
		return false
	}
	return d.evict.moving != nil || (d.srv != nil && d.srv.Disruption != nil)
}

// restsStopped reports whether the VM is stopped by a request, by its guest or by its run
// strategy, by the reason its status gives (rest: under a refusal, the stopped status's it
// replaced): a drain does not start it again (replacing), and a move under way ends with a
// stop.
func (d *decision) restsStopped() bool { return d.stopsWith(d.rest().reason) }

// stopsWith reports whether a status of reason r leaves the VM stopped (restsStopped).
func (d *decision) stopsWith(r string) bool {
	return atRest[r] || r == ReasonStopping || (r == ReasonServerFailed && !d.retries(r))
}
