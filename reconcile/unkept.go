package reconcile

import (
	"sync"

	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// notKept remembers, per VM, the last status the API server did not keep as it was sent
// (applier.unkept: a CRD older than the controller prunes a field of it, not read under
// --watch-crd=false) and the resourceVersion the API server answered that write with. Every
// later decision on the VM at that version makes the same status again, for the field is still
// missing: the loop of that reconcile stops at the answer, but each later reconcile of the VM
// (a change of its server, a requeue) sent it again, one or two writes each, none of them
// kept, for as long as the old CRD stayed. A status that says what the noted one said, to be
// written at the noted version, is not sent again; a change of the VM (another
// resourceVersion) or of what its status says is written as usual.
//
// The answer's version is the one noted, on either route: through the status subresource a
// write the API server keeps as no change answers at the version it was conditional on;
// through the main resource every status write is stored, and the VM moves to the version the
// answer gives, at which the next decision is made.
//
// One entry per VM at most, dropped when a status write is kept, when a decision is made at
// another version (the VM has moved on: the entry can never match again), and with the VM.
type notKept struct {
	mu sync.Mutex
	m  map[cache.ObjectName]unkeptStatus
}

// unkeptStatus is a status not kept as sent, as the write sent it, and the resourceVersion the
// API server answered that write with.
type unkeptStatus struct {
	rv     string
	status schema.Status
}

func newNotKept() *notKept { return &notKept{m: map[cache.ObjectName]unkeptStatus{}} }

// note remembers that st, written to the VM of key, was not kept as sent, the API server
// answering at rv. A nil notKept remembers nothing.
func (n *notKept) note(key cache.ObjectName, rv string, st schema.Status) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.m[key] = unkeptStatus{rv: rv, status: st}
	n.mu.Unlock()
}

// again reports whether st, a status to be written to the VM of key conditional on rv, says
// what the status noted at rv said (schema.Status.SameAs, which is what a decision compares a
// status with to write none: lastUpdateTime, which each decision sets, is left out), and so
// would not be kept either. An entry noted at another version is dropped.
func (n *notKept) again(key cache.ObjectName, rv string, st schema.Status) bool {
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	got, ok := n.m[key]
	if !ok {
		return false
	}
	if got.rv != rv {
		delete(n.m, key)
		return false
	}
	return st.SameAs(got.status)
}

// forget drops what is noted of the VM of key: a status write of it was kept, or it is gone.
func (n *notKept) forget(key cache.ObjectName) {
	if n == nil {
		return
	}
	n.mu.Lock()
	delete(n.m, key)
	n.mu.Unlock()
}
