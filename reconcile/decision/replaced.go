package decision

import "github.com/cloudnative-czs/vm-controller/backend"

// A replacement of the controller's whose status write was lost. To replace a server for a
// restart or a migration the controller deletes it, then writes the status that says so
// (ServerReplacing, Migrating, ...); for a spec change and for a server that ended it writes
// the status first (StatusFirst: nothing else says why that server goes). When a write after
// the delete is lost (a conflict: someone wrote the VM between the decision and the write),
// the next decision sees a status that still names the server as running (ClaimedServer) and
// the server going, or gone: what someone else's delete looks like (missingServer). Under
// Manual and Once that stopped the VM with ServerMissing until the user started it again, and
// under the others it gave that Warning: the controller took its own delete for someone
// else's.
//
// A request still new explains such a delete (requestTakesServer): a restart, a migration, a
// stop are carried out by the next decision anyway. The loop (reconcile) also remembers each
// server it deleted before the status, for a replacement, until a status write that no longer
// names that server goes through, and gives it to Decide as gone, with Replaced set: a
// migration's request explains a server gone only with the node it left (goingFrom), which a
// layout without status.server.node does not keep. The decision takes the record only for the
// server the status names, going (being deleted, with that ID) or gone; the replacement is
// then carried on as the lost write would have had it: the server is not missing, the VM is on
// its way to the next server, which has the spec the VM has now.
//
// Why a field of backend.Gone rather than an input of its own: gone already carries, beside
// the observed server, what is known of the VM's last server that the backend no longer shows;
// with it Decide keeps its inputs (and every caller, the plan command and the golden cases'
// gone.yaml their form), and stays pure: the memory is the loop's, and the decision reads it
// as data. A new leader (a failover between the delete and the write) remembers nothing: a
// request or the status written first tells it.

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
