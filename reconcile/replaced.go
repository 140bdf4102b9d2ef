package reconcile

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// replacements remember, per VM, the server this controller deleted to replace it, until a
// status write of the VM that no longer names that server goes through. For a restart or a
// migration the apply step deletes the server first and writes the status after (a
// replacement for the spec's sake, or of a server that ended, writes the status first:
// StatusFirst); when that write is lost (a conflict), the status still names the server, and
// the decision would take the server's going for someone else's delete, where the request
// does not explain it (decision/replaced.go says when). Given this record (backend.Gone,
// Replaced), it carries the replacement on instead.
//
// Unlike an expectation it has no timeout: the write may be retried for longer than any
// bound, and the status names the server all that while. It goes with the VM (forget), and a
// VM made again under the name (another UID) does not inherit it. It is memory only: a new
// leader that takes over between the delete and the write remembers nothing, and decides on
// the status and the VM's requests: a restart's or a migration's request, new until the status
// records it, explains the delete.
type replacements struct {
	mu sync.Mutex
	m  map[cache.ObjectName]replacement
}

// replacement is one VM's record: the VM's UID and the server deleted, as the decision takes
// it.
type replacement struct {
	vm     types.UID
	server backend.Gone
}

// deleted records that the controller deleted srv, the server of vm (of UID uid), to replace
// it.
func (r *replacements) deleted(vm cache.ObjectName, uid types.UID, srv *backend.Server) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[cache.ObjectName]replacement{}
	}
	r.m[vm] = replacement{vm: uid, server: backend.Gone{Name: srv.Name, ID: srv.ID, Node: srv.Node, Replaced: true}}
}

// written drops vm's record once a status write that no longer names the server deleted as
// there (decision.ClaimedServer) has gone through: the status then says what became of it.
func (r *replacements) written(vm cache.ObjectName, st schema.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	x, ok := r.m[vm]
	if !ok {
		return
	}
	if name := decision.ClaimedServer(st); name == x.server.Name && (st.Server.ID == "" || st.Server.ID == x.server.ID) {
		return
	}
	delete(r.m, vm)
}

// gone is what a decision of vm (of UID uid) is given as gone (Decide), with srv the server
// observed and departed what the backend remembers of a server gone while disrupted (nil:
// nothing): departed, or the server this controller deleted to replace it when that is the
// one observed, or none is (both, when the backend remembers that very server). A record of
// an earlier VM of the name is dropped.
func (r *replacements) gone(vm cache.ObjectName, uid types.UID, srv *backend.Server, departed *backend.Gone) *backend.Gone {
	r.mu.Lock()
	defer r.mu.Unlock()
	x, ok := r.m[vm]
	switch {
	case !ok:
		return departed
	case x.vm != uid:
		delete(r.m, vm)
		return departed
	case srv != nil && srv.ID != x.server.ID:
		return departed // a server came since: the status write that names it will drop the record
	case departed == nil:
		g := x.server
		return &g
	case departed.ID == x.server.ID:
		g := *departed
		g.Replaced = true
		return &g
	}
	return departed
}

// forget drops vm's record: the VM is gone.
func (r *replacements) forget(vm cache.ObjectName) {
	r.mu.Lock()
	delete(r.m, vm)
	r.mu.Unlock()
}
