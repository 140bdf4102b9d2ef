package reconcile

import "k8s.io/client-go/tools/cache"

// ledger is what the controller remembers of each VM, by its key, beyond what its caches show:
// its own actions and writes the caches have yet to bring back, and what it counts or noted of
// the VM between reconciles. Every record of it is per VM, and every one goes when the VM does
// (the reconcile that finds the VM gone): kept apart, each was forgotten on a line of its own,
// and a record added without its line would have grown with every VM ever deleted. forget
// drops them all at once; TestLedgerForgetsGoneVM fails for a record of the ledger that it
// does not drop.
//
// What the backend remembers of a VM (backend.Departures) is the backend's, not the ledger's:
// the reconcile that finds the VM gone tells it apart.
type ledger struct {
	// expect are the server actions the backend's cache has yet to show, and the servers
	// deleted to replace them (expect.go, replaced.go).
	expect *expectations
	// disks are the disk actions the backend's cache has yet to show (expectdisk.go).
	disks *diskExpectations
	// echoes are the resourceVersions of this controller's own writes that the informer has
	// yet to bring back, the VM as the last of them returned it, and the VMs released
	// (echo.go).
	echoes *echoes
	// passes counts each VM's reconciles until it is Active (echo.go).
	passes *passCounter
	// notKept are the statuses the API server did not keep as sent, not sent again at the
	// version it answered (unkept.go).
	notKept *notKept
}

func newLedger() ledger {
	return ledger{
		expect:  newExpectations(),
		disks:   newDiskExpectations(),
		echoes:  newEchoes(),
		passes:  &passCounter{m: map[cache.ObjectName]int{}},
		notKept: newNotKept(),
	}
}

// forget drops every record of the VM of key: it is gone.
func (l ledger) forget(key cache.ObjectName) {
	l.expect.forget(key)
	l.disks.forget(key)
	l.echoes.forget(key)
	l.passes.forget(key)
	l.notKept.forget(key)
}
