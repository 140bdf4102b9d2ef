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
