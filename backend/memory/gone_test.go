package memory

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestLastGone: a server removed while it carries a Disruption is remembered as gone while
// disrupted, for its VM only, until a server of the VM comes or the VM is forgotten; one
// removed undisrupted is not, and ends what was remembered.
func TestLastGone(t *testing.T) {
	vm := backend.Owner{Namespace: "ns", Name: "a", UID: "u-1"}
	evicted := &backend.Server{Name: "a-server", ID: "pod-1", State: backend.StateReady, Node: "node-a", Deleting: true,
		Disruption: &backend.Disruption{Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}
	want := backend.Gone{Name: "a-server", ID: "pod-1", Node: "node-a", Disruption: *evicted.Disruption}

	for name, tc := range map[string]struct {
		steps func(b *Backend)
		vm    backend.Owner // the VM asked about
		want  *backend.Gone
	}{
		"evicted, then gone":   {steps: func(b *Backend) { b.Set(vm, evicted); b.Set(vm, nil) }, vm: vm, want: &want},
		"evicted, still there": {steps: func(b *Backend) { b.Set(vm, evicted) }, vm: vm},
		"another VM of the name": {steps: func(b *Backend) { b.Set(vm, evicted); b.Set(vm, nil) },
			vm: backend.Owner{Namespace: "ns", Name: "a", UID: "u-2"}},
		"gone undisrupted": {steps: func(b *Backend) {
			s := *evicted
			s.Disruption = nil
			b.Set(vm, &s)
			b.Set(vm, nil)
		}, vm: vm},
		"a new server came": {steps: func(b *Backend) {
			b.Set(vm, evicted)
			b.Set(vm, nil)
			if _, err := b.Create(context.Background(), vm, backend.Spec{}); err != nil {
				t.Fatal(err)
			}
		}, vm: vm},
		"a new server came, and went undisrupted": {steps: func(b *Backend) {
			b.Set(vm, evicted)
			b.Set(vm, nil)
			b.Set(vm, &backend.Server{Name: "a-server", ID: "pod-2", State: backend.StateReady})
			b.Set(vm, nil)
		}, vm: vm},
		"the VM is gone": {steps: func(b *Backend) {
			b.Set(vm, evicted)
			b.Set(vm, nil)
			b.Forget(types.NamespacedName{Namespace: "ns", Name: "a"})
		}, vm: vm},
		"planted": {steps: func(b *Backend) { b.SetGone(vm, &want) }, vm: vm, want: &want},
	} {
		t.Run(name, func(t *testing.T) {
			b := New()
			tc.steps(b)
			got := b.LastGone(tc.vm)
			switch {
			case (got == nil) != (tc.want == nil):
				t.Fatalf("LastGone = %+v, want %+v", got, tc.want)
			case got != nil && *got != *tc.want:
				t.Fatalf("LastGone = %+v, want %+v", *got, *tc.want)
			}
		})
	}
}

// TestParseGone: a gone server reads as written; one without a name or a disruption's reason,
// or with a key it does not have, is refused in the file's terms.
func TestParseGone(t *testing.T) {
	g, err := ParseGone([]byte("name: a-server\nid: pod-1\nnode: node-a\ndisruption: {reason: EvictionByEvictionAPI, message: m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (backend.Gone{Name: "a-server", ID: "pod-1", Node: "node-a",
		Disruption: backend.Disruption{Reason: "EvictionByEvictionAPI", Message: "m"}}); *g != want {
		t.Errorf("got %+v, want %+v", *g, want)
	}
	// One the controller deleted to replace it needs no disruption.
	if g, err := ParseGone([]byte("name: a-server\nid: pod-1\nreplaced: true\n")); err != nil || *g != (backend.Gone{Name: "a-server", ID: "pod-1", Replaced: true}) {
		t.Errorf("replaced: got %+v, %v", g, err)
	}
	for in, want := range map[string]string{
		"":                                     "empty",
		"id: pod-1\ndisruption: {reason: R}\n": "needs a name",
		"name: a-server\n":                     "a reason is needed",
		"name: a-server\ndisruption: {reason: R}\nstate: Ready\n": "field state is not a key of a gone server (name, id, node, disruption, replaced)",
		"name: a-server\ndisruption: {reason: R, why: x}\n":       "field why is not a key of a gone server's disruption (reason, message)",
	} {
		if _, err := ParseGone([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseGone(%q) = %v, want an error with %q", in, err, want)
		}
	}
}
