// Package reconcile decides what a VirtualMachine needs and makes it so.
//
// The decision is a pure function, Policy.Decide: from a view of the VM, the server a backend
// observed and the time, it returns a Plan, which is data (status to write, finalizer to add or
// remove, server to create or delete, events, when to look again). It does no I/O and does not
// log, so golden files under testdata/ pin every decision.
//
// Around it, Controller is the loop in the shape of sample-controller: a dynamic informer feeds
// keys into a rate-limited workqueue; workers gather the VM from the cache and the server from
// the backend, decide, and apply the plan through the dynamic client, writing only what changed.
package reconcile
