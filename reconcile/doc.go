// Package reconcile decides what a VirtualMachine needs and makes it so. It owns the decision,
// the loop that carries it out, and the VM informer's cached form.
//
// The decision is a pure function, Policy.Decide: from a view of the VM, the server a backend
// observed (in backend-neutral states) and the time, it returns a Plan, which is data (status
// to write, finalizer to add or remove, server to create or delete, events, when to look
// again). It does no I/O and does not log, so golden files under testdata/decide pin every
// decision. UsagePolicy.DecideUsage is the same for usage samples. Every reason it writes is a
// constant in reasons.go.
//
// Around it, Controller is the loop in the shape of sample-controller: an informer of the VMs,
// which keeps each VM as a compact Object (cached.go), feeds keys into a rate-limited
// workqueue; workers gather the VM from the cache and the server from the backend, decide, and
// apply the plan (apply.go), writing only what changed. With a REST client (Config.REST, as
// the controller runs) the informer lists and watches through it and reads each VM from the
// wire into its Object in place (watch.go), and the writes go through it too, each answer read
// the same way (write.go, restWriter). Without one (the unit tests, over client-go's dynamic
// fake) the informer is a dynamic one whose transform compacts each object, and the writes go
// through the dynamic client (dynamicWriter). A poller (poller.go) samples the usage of Active
// VMs and writes it; the informer ignores those writes (usagefilter.go). Expectations
// (expect.go) cover the window between the controller's own creates and deletes and the
// backend's cache showing them.
package reconcile
