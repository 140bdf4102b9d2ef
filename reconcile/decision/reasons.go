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
	ReasonServerExited    = "ServerExited"    // Failed: the server stopped by itself; a new one follows after a backoff
	ReasonServerRejected  = "ServerRejected"  // Failed: the backend refused to create the server
	ReasonServerDeleting  = "ServerDeleting"  // Terminating: the server is being deleted, then the VM goes
	ReasonNodeLost        = "NodeLost"        // Unknown: the server's node does not answer
	// Unknown: the backend reports a state this controller does not know (a newer backend).
	ReasonServerStateUnknown = "ServerStateUnknown"

	// Events only: what the controller did and why.
	ReasonCreatingServer   = "CreatingServer"
	ReasonDeletingServer   = "DeletingServer"
	ReasonReplacingServer  = "ReplacingServer"
	ReasonRestartingServer = "RestartingServer"
	ReasonServerMissing    = "ServerMissing"   // Warning: the server went without the controller deleting it
	ReasonResizingServer   = "ResizingServer"  // a resize in place was asked for
	ReasonServerResized    = "ServerResized"   // the new cpu and memory are in effect
	ReasonServerRestarted  = "ServerRestarted" // the server is replaced on request (the restart annotation)

	// Reasons of the Resizing condition: how far a resize in place has got.
	ReasonResizePending    = "ResizePending"    // asked for; the host has not answered
	ReasonResizeDeferred   = "ResizeDeferred"   // the host cannot take it now and retries by itself
	ReasonResizeInProgress = "ResizeInProgress" // granted and being applied (or failing and retried)
	// ResizeInfeasible: the host will never take it. Reason of RestartRequired under --resize
	// manual, and of Resizing for the moment between a refusal and the replacement under
	// in-place.
	ReasonResizeInfeasible = "ResizeInfeasible"
	// Reason of RestartRequired: the change (rootDisk, image, a server that cannot resize)
	// needs a new server and --resize manual leaves that to the user.
	ReasonSpecChangeNeedsRestart = "SpecChangeNeedsRestart"

	// Reasons of the UsageReported condition (DecideUsage).
	ReasonUsageReported         = "UsageReported"         // True: usage comes from the metrics API
	ReasonMetricsAPIUnavailable = "MetricsAPIUnavailable" // False: the cluster serves no usage figures
)

// Reasons of a paused VM (paused.go): of the Paused condition, and of its Events.
const (
	ReasonPaused         = "Paused"         // Paused condition and Normal Event: the controller leaves the VM alone
	ReasonDeletionPaused = "DeletionPaused" // Paused condition and Warning Event: the VM is deleted, and its deletion waits
	ReasonResumed        = "Resumed"        // Event only: the pause annotation is gone; the controller manages the VM again
)
