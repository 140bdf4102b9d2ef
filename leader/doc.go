// Package leader is run's leader election: every replica fills its caches, and only the
// holder of the Lease reconciles (Lead); and the write fence, which keeps a leader that may
// have lost the Lease without knowing it from writing over its successor's work (Fence).
//
// Why a package: the fence is concurrency-critical, and its guarantee rests on rules that
// hold only together: the Lease lock that tells the fence of each renewal and refuses a
// renewal of another term or a release of another replica's record (fencedLock), the clocks
// the fence measures by (fenceClock), and the transport that refuses a write, or abandons one
// still unsent, once the last renewal is too old (fencedTransport). Kept apart from the
// command line, those rules and their tests are read in one place, and the command that runs
// the controller holds only the wiring: a Fence made from --renew-deadline, its Wrap around
// the transport of every client but the Lease's, its Check given to the loop, and Lead
// running the workers. The reasoning behind the bound the fence keeps is in fence.go.
package leader
