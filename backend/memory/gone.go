package memory

import (
	"errors"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/strictyaml"
)

// The backend's memory of servers that went while disrupted (backend.Departures), modelled
// on the pods backend's: a server removed (Set to nil) while it carried a Disruption is
// remembered, with the UID of the VM it was for, until a server of the VM comes (Create, Set)
// or the VM goes (Forget). The golden cases of the decision plant one (gone.yaml, SetGone),
// and the loop's tests make one by removing an evicted server.

var _ backend.Departures = (*Backend)(nil)

// departed is what the backend remembers of one VM's last server.
type departed struct {
	vm   types.UID // the VM the server was for: a VM of the name made again is another
	gone backend.Gone
}

// LastGone returns a copy of what is remembered of vm's last server, when it went while
// disrupted and no server of vm came after it; nil otherwise.
func (b *Backend) LastGone(vm backend.Owner) *backend.Gone {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := key(vm)
	d, ok := b.departed[k]
	if _, has := b.servers[k]; !ok || has || d.vm != vm.UID {
		return nil
	}
	g := d.gone
	return &g
}

// Forget drops what is remembered for the VM named vm.
func (b *Backend) Forget(vm types.NamespacedName) {
	b.mu.Lock()
	delete(b.departed, vm)
	b.mu.Unlock()
}

// SetGone makes the backend remember g as vm's last server, gone while disrupted (nil:
// nothing), as if it had seen it go. It does not notify: nothing of vm's that a decision sees
// changes until the server is gone, and a case that plants one has no server.
func (b *Backend) SetGone(vm backend.Owner, g *backend.Gone) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g == nil {
		delete(b.departed, key(vm))
		return
	}
	b.departed[key(vm)] = departed{vm: vm.UID, gone: *g}
}

// leftLocked records, as vm's server s is removed, whether it went while disrupted: what
// is remembered is s's disruption, or nothing. b.mu is held.
func (b *Backend) leftLocked(vm backend.Owner, s *backend.Server) {
	k := key(vm)
	if s.Disruption == nil {
		delete(b.departed, k)
		return
	}
	b.departed[k] = departed{vm: vm.UID, gone: backend.Gone{Name: s.Name, ID: s.ID, Node: s.Node, Disruption: *s.Disruption}}
}

// ParseGone reads a server that went while disrupted, written down as YAML, in the golden
// cases of the decision:
//
//	name: test-vm-server
//	id: pod-uid-1
//	node: node-a        # optional: where it ran
//	disruption: {reason: EvictionByEvictionAPI, message: "Eviction API: evicting"}
//	replaced: true      # optional: the controller deleted it to replace it (backend.Gone.Replaced)
//
// Unknown keys are errors; it needs a name, and a disruption's reason unless it was replaced.
func ParseGone(data []byte) (*backend.Gone, error) {
	var in backend.Gone
	dec := strictyaml.NewDecoder(data)
	if err := dec.Decode(&in); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the gone server is empty")
		}
		return nil, errors.New(strings.ReplaceAll(goneTerms.Replace(err.Error()), "\n", " "))
	}
	switch {
	case in.Name == "":
		return nil, errors.New("a gone server needs a name")
	case in.Disruption.Reason == "" && !in.Replaced:
		return nil, errors.New("disruption: a reason is needed (for pods: the DisruptionTarget condition's, such as EvictionByEvictionAPI)")
	}
	return &in, nil
}

// goneTerms rewrites yaml.v3's messages, which name Go types, in the terms of the file.
var goneTerms = strings.NewReplacer(
	"yaml: unmarshal errors:\n  ", "", "\n  ", "; ", "yaml: ", "",
	" not found in type backend.Gone", " is not a key of a gone server (name, id, node, disruption, replaced)",
	" into backend.Gone", " into a gone server (want a mapping)",
	" not found in type backend.Disruption", " is not a key of a gone server's disruption (reason, message)",
	" into backend.Disruption", " into a gone server's disruption (want a mapping)",
)
