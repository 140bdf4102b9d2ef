// Package priority is the order in which the controller's work queue hands out VMs: new work
// first, then the backlog.
//
// New work is what a user just asked for or what just changed in the world: a VM created,
// deleted, or changed in its spec, annotations or deletion, after the controller started; a
// server that changed after the servers' first list; a VM of the first list that was never
// reconciled, was deleted or had its spec changed while no controller ran; and the retries
// and requeues of such work. The backlog is everything else a start queues: every VM of the
// initial list, to be looked at once, each most likely with nothing to do.
//
// Why: a start over many VMs (a rollout, a leader change) queues every VM of the initial
// list, and a plain FIFO queue made a VM created a moment later wait behind all of them:
// minutes at tens of thousands of VMs, for a reconcile that changes nothing for almost all of
// them. controller-runtime added a priority queue for the same reason. Here new work goes
// ahead, and the backlog drains at full speed whenever there is no new work; as new work is
// bounded by what users and the cluster do, the backlog waits only while they act.
//
// Why a Queue under client-go's workqueue and not a queue of its own: client-go's
// rate-limiting queue takes the order from a workqueue.Queue it is given
// (TypedQueueConfig.Queue) and keeps everything else: a key is queued once however often it is
// added (the dirty set), never handed to two workers at once (the processing set), delayed and
// rate-limited, and measured by the same workqueue_* metrics. Queue only decides the order,
// in two FIFO lanes. controller-runtime's priorityqueue does the same job but brings
// controller-runtime into the product's go.mod, which keeps to client-go.
//
// The workqueue's Add does not say how urgent an item is, so Queue learns it from a mark set
// just before the Add (AddUrgent and its kin): the item's next entry into the queue, or its
// promotion when it is queued already, goes to the urgent lane. The mark of a delayed add
// (AddUrgentAfter, AddUrgentRateLimited) is set as it comes due, not when it is made, so that
// a plain add in between neither takes it nor leaves the requeue in the backlog.
package priority
