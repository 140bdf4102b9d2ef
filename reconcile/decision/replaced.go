package decision

import "github.com/cloudnative-czs/vm-controller/backend"

// A replacement of the controller's whose status write was lost. To replace a server (a spec
// change, a restart, a migration, a server that failed) the controller deletes it, then writes
// the status that says so (ServerReplacing, Migrating, ...). When that write is lost (a
// conflict: someone wrote the VM between the decision and the write), the next decision sees
// a status that still names the server as running (ClaimedServer) and the server going, or
// gone: what someone else's delete looks like (missingServer). Under Manual and Once that
// stopped the VM with ServerMissing until the user started it again, and under the others it
// gave that Warning: the controller took its own delete for someone else's.
//
// A request still new explains such a delete (requestTakesServer): a restart, a migration, a
// stop are carried out by the next decision anyway. A spec change leaves nothing to read from
// the VM, so the loop (reconcile) remembers each server it deleted for a replacement until a
// status write that no longer names that server goes through, and gives it to Decide as gone,
// with Replaced set. The decision takes it only for the server the status names, going (being
// deleted, with that ID) or gone; the replacement is then carried on as the lost write would
// have had it: the server is not missing, the VM is on its way to the next server, which has
// the spec the VM has now.
//
// Why a field of backend.Gone rather than an input of its own: gone already carries, beside
// the observed server, what is known of the VM's last server that the backend no longer shows;
// with it Decide keeps its inputs (and every caller, the plan command and the golden cases'
// gone.yaml their form), and stays pure: the memory is the loop's, and the decision reads it
// as data. What a new leader (a failover between the delete and the write) cannot know is out
// of reach: it remembers nothing, and decides as before, on the status alone.

// replacedBy records g as the server the controller deleted to replace it (replaced), when it
// is one (Replaced) and the status names it: the server observed is that one being deleted,
// or there is none.
func (d *decision) replacedBy(g *backend.Gone) {
	srv := d.srv
	if g == nil || !g.Replaced || srv != nil && (!srv.Deleting || srv.ID != g.ID) || !d.claimedGone(g) {
		return
	}
	d.replaced = g
}
