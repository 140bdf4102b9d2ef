// Package vmcache is the VM informer's side of the wire: the compact form each VM is cached in,
// and the reading of VMs from the API server's bytes into it.
//
//   - Object (cached.go) is a VM as the informer keeps it: the JSON a view reads, packed against
//     a dictionary of sample VMs (pack.go), and the metadata the informer itself needs. Compact
//     and Transform make it from an unstructured object, for a dynamic informer.
//   - ListerWatcher (watch.go) lists and watches VMs over a REST client and reads each one from
//     the bytes on the wire into its Object in place (compactor.go; the JSON watch frames are cut
//     by frame.go, in watchframe's skeleton); Answer reads the answer to a write into the same
//     cut, so that the loop can decide again on it.
//   - OnlyUsageChanged (usagefilter.go) tells an update that changed only the reported usage,
//     which the informer's handler drops.
//
// Why a package of its own: this is the codec and the memory of the controller, measured and
// tuned for a cold start over many VMs (docs/dev/benchmarks.md); the decision
// (reconcile/decision) does not need it, and the loop (reconcile) needs only its exported forms. Kept apart, each can change
// without the others, and the wire's dependencies (client-go's REST client and cache) stay out
// of the decision.
package vmcache
