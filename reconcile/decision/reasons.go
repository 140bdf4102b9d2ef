package decision

// Reasons, in status.reason, in the conditions and on Events: every reason the controller
// writes is one of these. They are machine-readable CamelCase words; what a user should do
// about each is in docs/reference/phases-reasons-events.md (TestReasonsDocumented).
const (
	ReasonServerCreating  = "ServerCreating"  // Creating: a server was asked for and is not running yet
	ReasonServerStarting  = "ServerStarting"  // Creating: the server runs and is not ready yet
	ReasonServerReplacing = "ServerReplacing" // Creating: the old server is being deleted first
	ReasonServerReady     = "ServerReady"     // Active: the server runs and is ready
	ReasonServerStopping  = "ServerStopping"  // Inactive: the server is being deleted
	ReasonServerStopped   = "ServerStopped"   // Inactive: no server
	ReasonInvalidSpec     = "InvalidSpec"     // Failed: the spec cannot be run; fix it
	ReasonServerFailed    = "ServerFailed"    // Failed: the server failed; a new one follows after a backoff
	ReasonServerRejected  = "ServerRejected"  // Failed: the backend refused to create the server
	ReasonServerDeleting  = "ServerDeleting"  // Terminating: the server is being deleted, then the VM goes
	ReasonNodeLost        = "NodeLost"        // Unknown (Creating, Inactive, Terminating: replaced, stopped, deleted): the server's node does not answer
	// Unknown: the backend reports a state this controller does not know (a newer backend).
	ReasonServerStateUnknown = "ServerStateUnknown"
	// Terminating for a deleted VM, else Failed; stalled, and a Warning: the backend refused
	// to delete the server (deleterefused.go).
	ReasonServerDeleteRefused = "ServerDeleteRefused"

	// Events only: what the controller did and why.
	ReasonCreatingServer   = "CreatingServer"
	ReasonDeletingServer   = "DeletingServer"
	ReasonReplacingServer  = "ReplacingServer"
	ReasonRestartingServer = "RestartingServer"
	ReasonServerMissing    = "ServerMissing"   // Warning: the server went without the controller deleting it
	ReasonResizingServer   = "ResizingServer"  // a resize in place was asked for
	ReasonServerResized    = "ServerResized"   // the new cpu and memory are in effect
	ReasonServerRestarted  = "ServerRestarted" // the server is replaced on request (the restart annotation)
	// A restart request is recorded and the server kept: it is taken for the server the
	// restart's own create made, which no status had reported yet (unrecorded).
	ReasonRestartNotNeeded = "RestartNotNeeded"

	// Reasons of the Resizing condition: how far a resize in place has got.
	ReasonResizePending    = "ResizePending"    // asked for; the host has not answered
	ReasonResizeDeferred   = "ResizeDeferred"   // the host cannot take it now and retries by itself
	ReasonResizeInProgress = "ResizeInProgress" // granted and being applied (or failing and retried)
	// ResizeInfeasible: the host will never take it. Reason of RestartRequired under --resize
	// manual, and of Resizing for the moment between a refusal and the replacement under
	// in-place.
	ReasonResizeInfeasible = "ResizeInfeasible"
	// ResizeNoRoom: the running server is to be replaced for a change of the spec (a resize
	// its host refused, a change that cannot be made in place, any change under --resize
	// replace), and no host the controller knows that the new spec's placement admits has
	// room for its cpu or memory:
	// the server is kept rather than replaced by one that could not start anywhere (room.go).
	// Reason of RestartRequired, kept for the spec's generation.
	ReasonResizeNoRoom = "ResizeNoRoom"
	// Reason of RestartRequired: the change (rootDisk, image, a server that cannot resize)
	// needs a new server and --resize manual leaves that to the user.
	ReasonSpecChangeNeedsRestart = "SpecChangeNeedsRestart"

	// Reasons of the UsageReported condition (DecideUsage).
	ReasonUsageReported         = "UsageReported"         // True: usage comes from the metrics API
	ReasonMetricsAPIUnavailable = "MetricsAPIUnavailable" // False: the cluster serves no usage figures
)

// Reasons of the VM's disk (Policy.RootDisk claim): a phase's reason, the DiskResizing
// condition's, and Events of what the controller did with the disk.
const (
	ReasonWaitingForDisk = "WaitingForDisk" // Creating: the server waits for its disk (not bound, lost or going)
	ReasonDiskConflict   = "DiskConflict"   // Failed: a disk of the VM's name is another's; never taken over
	ReasonDiskRejected   = "DiskRejected"   // Failed: the backend refused to create the disk
	// Terminating, stalled, and a Warning: the VM is deleted and stays, its finalizer on,
	// because the release of the disk it owns was refused (reclaim policy Retain).
	ReasonDiskReleaseRefused = "DiskReleaseRefused"

	// Events only.
	ReasonCreatingDisk  = "CreatingDisk"  // the disk is created, before the server that mounts it
	ReasonAdoptingDisk  = "AdoptingDisk"  // the VM takes a kept disk of its name, or owns its own again (reclaim policy Delete)
	ReasonRetainingDisk = "RetainingDisk" // the VM stops owning its disk so that it outlives the VM (reclaim policy Retain)
	ReasonResizingDisk  = "ResizingDisk"  // a larger size was asked of the disk
	ReasonDiskResized   = "DiskResized"   // the disk has the size asked for
	ReasonDeletingDisk  = "DeletingDisk"  // the VM is deleted and its disk with it (reclaim policy Delete)
	ReasonDiskRetained  = "DiskRetained"  // the VM is deleted and its disk kept (reclaim policy Retain)

	// Reasons of the DiskResizing condition: how far the growth of the disk has got, or why
	// it does not happen (each of the last three also a Warning Event when it begins).
	ReasonDiskResizePending    = "DiskResizePending"    // asked for; the storage has not taken it up (or the disk is not bound yet)
	ReasonDiskResizeInProgress = "DiskResizeInProgress" // the storage is growing it
	ReasonDiskResizeInfeasible = "DiskResizeInfeasible" // the storage refused; the disk keeps its size
	ReasonDiskNotExpandable    = "DiskNotExpandable"    // the disk's class does not let it grow; it keeps its size
	ReasonDiskShrinkRefused    = "DiskShrinkRefused"    // rootDisk is below the disk's size; a disk never shrinks

	// Reason of Stalled, and a Warning Event when it begins: the spec names another storage
	// class than the one the disk was made in, which a disk never changes (d.disk.class).
	ReasonDiskClassChangeRefused = "DiskClassChangeRefused"
	// Reason of Stalled, and a Warning Event when it begins: the VM's own disk, bound, is
	// being deleted, not by the controller, while a server holds it (d.disk.going).
	ReasonDiskDeleting = "DiskDeleting"
	// Event only (Warning): the disk the VM had, bound, was deleted, not by the controller,
	// and a new, empty one is created in its place.
	ReasonDiskRecreated = "DiskRecreated"
	// Event only (Warning): the disk the VM had, bound, was deleted, not by the controller,
	// while no server held it (a stopped VM): the next server gets a new, empty one.
	ReasonDiskDeleted = "DiskDeleted"
)

// Reasons of a paused VM (paused.go): of the Paused condition, and of its Events.
const (
	ReasonPaused         = "Paused"         // Paused condition and Normal Event: the controller leaves the VM alone
	ReasonDeletionPaused = "DeletionPaused" // Paused condition and Warning Event: the VM is deleted, and its deletion waits
	ReasonResumed        = "Resumed"        // Event only: the pause annotation is gone; the controller manages the VM again
)

// Reasons of a server stuck on its way (stuck.go): the phase's reason instead of
// ServerCreating, and the Stalled condition's once it is stuck for longer than
// --stalled-after. The Reconciling and Stalled conditions (kstatus.go) otherwise take the
// phase's reason.
const (
	ReasonUnschedulable    = "Unschedulable"    // Creating: no node can take the server; the message is the scheduler's
	ReasonImagePullFailing = "ImagePullFailing" // Creating: the server's image cannot be pulled; the message is the kubelet's
	// Creating: the server is placed on a node and has not started there for longer than
	// --stalled-after (for pods: its containers not created, as for a volume that cannot
	// attach); named only then, Stalled with it.
	ReasonServerNotStarting = "ServerNotStarting"
	// Event only (Warning): a server stuck for longer than --stalled-after made the VM
	// Stalled. A reason of its own, so that the recorder does not fold it into the series of
	// the stuck reason's Events, note and all.
	ReasonStalled = "Stalled"
)

// Reasons of the run strategies (runstrategy.go, requests.go): a VM stopped on request or
// after its guest shut down, one that waits for a start, and the Events of the requests.
const (
	ReasonGuestShutDown = "GuestShutDown" // Inactive: the server ended cleanly (pod Succeeded) and is not replaced (RerunOnFailure, Once, Manual)
	ReasonStopping      = "Stopping"      // Inactive: a stop request's deletion of the server is under way
	ReasonStopped       = "Stopped"       // Inactive: stopped on request; a start request starts it
	ReasonNotStarted    = "NotStarted"    // Inactive: runStrategy Manual and no start request yet

	ReasonStartingServer = "StartingServer" // Event: a start request deletes the ended server, so that a new one follows
	ReasonStoppingServer = "StoppingServer" // Event: a stop request deletes the server
)

// Reasons of the eviction strategies (eviction.go): a phase's reason, the conditions Moving
// and EvictionBlocked, and Events.
const (
	ReasonServerEvicted = "ServerEvicted" // Creating, and Moving: the server is being evicted; a new one follows, on another node if one fits (Replace)
	ReasonDrainBlocked  = "DrainBlocked"  // EvictionBlocked and Warning Event: the node is cordoned and the budget holds its drain (Block)

	// Events only.
	ReasonMovingServer   = "MovingServer"   // the server after an eviction is created (Replace)
	ReasonServerMoved    = "ServerMoved"    // the server after an eviction is ready (Replace)
	ReasonCreatingBudget = "CreatingBudget" // the VM's disruption budget is created (Block)
	ReasonAdoptingBudget = "AdoptingBudget" // a budget an earlier VM of the name left controlled by nothing becomes the VM's (Block)
	ReasonDeletingBudget = "DeletingBudget" // the VM's disruption budget is deleted (the strategy is no longer Block, or the VM is deleted)
	// Warning: on a deleted VM's way out the backend refused to delete its budget; the VM
	// goes, and the budget may be left behind (BudgetLeftBehind).
	ReasonBudgetLeftBehind = "BudgetLeftBehind"
	// Warning: the backend refused the VM's budget (its create or adoption) under Block: a
	// drain of the server's node does not wait for the VM until it is made (BudgetRefused).
	ReasonBudgetRefused = "BudgetRefused"
)

// Reasons of placement, migration on request and lost nodes (placement.go, migrate.go,
// nodelost.go).
const (
	// Creating: the server is being moved to another node on request (the migrate
	// annotation): the old one is deleted first, then a new one starts elsewhere.
	ReasonMigrating = "Migrating"
	// Events only.
	ReasonMigrated         = "Migrated"         // the moved server runs and is ready on another node
	ReasonMigrationRefused = "MigrationRefused" // Warning: a migration was asked for and refused; nothing changed
	ReasonMigrationFailed  = "MigrationFailed"  // Warning: no other node took the moved server in time; it starts again anywhere
)
