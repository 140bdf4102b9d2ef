package decision

import (
	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// where puts where srv runs (its node and address) into the status's server, for
// `kubectl get vm -o wide`, when the VM's layout has a place for them: a layout without one
// would read them back as absent and see a change on every decision.
func (d *decision) where(st *schema.ServerStatus, srv *backend.Server) {
	f := d.vm.Fields()
	if f.ServerNode != "" {
		st.Node = srv.Node
	}
	if f.ServerIP != "" {
		st.IP = srv.IP
	}
}

// placedOnly reports whether st differs from the current status only in where a server still
// on its way runs (its node, then its address). A server is placed and given an address before
// it is ready; a status write for each would be one or two more writes per VM on the way to
// Active, whose write carries them. A server stuck on its way is reported with a reason of its
// own (stuck.go), whose write carries them too.
func (d *decision) placedOnly(st schema.Status) bool {
	cur := d.current
	if st.Phase != schema.PhaseCreating || cur.Phase != schema.PhaseCreating || st.Server == nil || cur.Server == nil {
		return false
	}
	s := *st.Server
	s.Node, s.IP = cur.Server.Node, cur.Server.IP
	st.Server = &s
	return st.SameAs(cur)
}
