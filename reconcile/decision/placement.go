package decision

// Placement (docs/placement.md): the VM's spec.placement goes into the server's spec
// (backend.Spec.Placement) and the backend puts it on the server (for pods: the pod's
// nodeSelector, affinity, tolerations, priorityClassName and topologySpreadConstraints). A
// server keeps the placement it was made with; a change of it is a change only a new server
// takes, so it follows the rules of --resize for what cannot change in place (specChanged):
// the server is replaced, or under --resize manual kept with RestartRequired until the user
// asks for a restart. A placement no node satisfies leaves the server pending, and the VM
// says the scheduler's reason.

// placementChange adds the placement to the description of a change, for the Event and the
// RestartRequired condition.
func placementChange(s string) string {
	if s != "" {
		s += ", "
	}
	return s + "placement changed"
}
