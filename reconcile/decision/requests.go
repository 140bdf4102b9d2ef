package decision

import (
	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The start and stop requests (schema.AnnotationStartRequestedAt, AnnotationStopRequestedAt):
// each value is acted on once and recorded in status (startRequestedAt, stopRequestedAt) in
// the same write that carries it out, so that neither a controller restart nor a new leader
// acts on it twice; a write that does not carry it out (a refusal: pendingStart, and the plans
// of a backend's refusals, which record no request) leaves it pending. Of two new requests the
// later one wins, and the other is recorded at once as overtaken (a stop written after a start
// means the user wants it stopped).

// newRequests are the start and stop requests not yet acted on; at most one of them is set,
// the winner (the other, if new too, is recorded here as overtaken).
func (d *decision) newRequests() (start, stop schema.Request) {
	start, stop = d.vm.StartRequested(), d.vm.StopRequested()
	if start.Value == d.current.StartRequestedAt {
		start = schema.Request{}
	}
	if stop.Value == d.current.StopRequestedAt {
		stop = schema.Request{}
	}
	if start.Value != "" && stop.Value != "" {
		if start.At.After(stop.At) {
			d.next().StopRequestedAt, stop = stop.Value, schema.Request{}
		} else { // a tie goes to the stop: it is the one that cannot harm the guest's data
			d.next().StartRequestedAt, start = start.Value, schema.Request{}
		}
	}
	return start, stop
}

// recordRequests records new start and stop requests without acting on them: under Always
// and Halted the spec alone says whether a server runs (`kubectl vm start|stop` change the
// spec there), and a request left unrecorded would act later, when the strategy turns to one
// that heeds requests. It returns the new stop request ("" for none), for Halted's one use of
// it: a stop with a grace period cuts a deletion under way short (inactive).
func (d *decision) recordRequests() (stop string) {
	start, st := d.newRequests()
	if start.Value != "" {
		d.next().StartRequestedAt = start.Value
	}
	if st.Value != "" {
		d.next().StopRequestedAt = st.Value
	}
	return st.Value
}

// stopGrace is the grace period of a deletion that stops the VM, as the stop annotation asks
// (nil: the backend's default). None for a server on a node that does not answer (Lost, or
// Pending there: NodeSilent, which its node may have started since it last reported): a short one
// (`kubectl vm stop --force`: 0) removes its pod at once, while its guest may still run there
// with the disk, and the next server would mount it beside it; the backend's default leaves
// the pod until its node confirms or is deleted (nodelost.go names the way out for a node down
// for good).
func (d *decision) stopGrace() *Duration {
	if d.srv != nil && (d.srv.State == backend.StateLost || d.srv.NodeSilent) {
		return nil
	}
	g, ok := d.vm.StopGracePeriod()
	if !ok {
		return nil
	}
	out := Duration(g)
	return &out
}
