// Package reconcile makes what the decision asks for so: it is the loop around the pure
// decision (package reconcile/decision) and the only code here that writes.
//
// Controller is the loop in the shape of sample-controller: an informer of the VMs, which
// keeps each VM as a compact vmcache.Object, feeds keys into a rate-limited workqueue that
// hands out new work before a start's backlog (package priority; what is new work: urgency.go);
// workers gather the VM from the cache and the server and its disk from the backend, decide
// (decision.Policy.Decide), and apply the plan (apply.go; the disk's action, applydisk.go),
// writing only what changed. With a
// REST client (Source.REST, as the controller runs) the informer lists and watches through it
// and reads each VM from the wire into its Object in place (vmcache.ListerWatcher), and the
// writes go through it too, each answer read the same way (write.go, restWriter, through
// vmcache.Answer). Without one (the unit tests, over client-go's dynamic fake) the informer
// lists and watches through the dynamic client and its transform compacts each object
// (vmcache.Transform), and the writes go through the dynamic client (dynamicWriter). Either
// way it is client-go's plain informer, its one handler called where each event is stored
// (vmInformer says why). A poller (poller.go) samples the usage of Active
// VMs and writes it; the informer ignores those writes (vmcache.OnlyUsageChanged), and drops
// the echoes of the loop's own writes (echo.go), whose last answer a reconcile decides on
// until the informer brings it back. Expectations (expect.go, expectdisk.go) cover the window
// between the controller's own actions on servers and disks and the backend's cache showing
// them; they, the echoes and the rest of what the controller remembers of each VM are one
// ledger (ledger.go), forgotten with the VM. The
// CRD watch (served.go) stops and restarts the informer as the resource stops and starts being
// served; statusroute.go writes status through /status or, on a CRD without it, the main
// resource.
//
// No one VM can stop the loop: each reconcile runs under a deadline (Retry.ReconcileTimeout),
// so a call that hangs ends as a transient error and the worker goes on; a panic in a
// reconcile is recovered, logged with the stack and the VM's key, counted (result "panic")
// and retried with backoff, as an error is.
//
// The packages split the work so that each has one job: reconcile/decision decides and
// imports no client; reconcile/vmcache is the VM cache and its wire codec; reconcile/priority
// orders the work queue; this package gathers, applies and writes.
package reconcile
