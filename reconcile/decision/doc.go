// Package decision decides what a VirtualMachine needs, as data. Policy.Decide takes an Input (a
// view of the VM, the server, the disk and the budget a backend observed, in backend-neutral
// states, and the time) and returns a Plan: status to write, finalizer to add or remove, disk to
// create, adopt, grow, release or delete (disk.go, under --root-disk claim), server to create,
// delete or resize, events, when to look again. Policy.Rejected, Policy.ResizeRefused,
// Policy.DiskRejected and the other refusals are the plans for a backend's refusals, each
// decided on the Input of the plan refused and the refusal's message; UsagePolicy.DecideUsage
// is the same kind of decision for usage samples. Every reason it writes is a constant in
// reasons.go.
//
// Why a package of its own: the decision is pure (no I/O, no log, no clock but the one it is
// given), so golden files under testdata/decide pin every decision, FuzzDecide holds it to
// "after the plan, nothing is left to do", and the plan command runs the same code offline.
// Beside the loop and its writes, nothing kept it so but care. Here it imports no client: its
// imports are the schema (views and status), the backend contract (Server, Disk, Spec, State) and
// apimachinery's value types, and TestNoClient fails the build of any change that makes it
// depend on client-go or on HTTP.
package decision
