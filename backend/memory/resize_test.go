package memory

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
)

func spec(cpu, memory string) backend.Spec {
	return backend.Spec{CPU: resource.MustParse(cpu), Memory: resource.MustParse(memory), RootDisk: resource.MustParse("40G"), Image: "img:1"}
}

func report(s *backend.Server) string {
	return fmt.Sprintf("%s %s/%s %s %q %s/%s", s.ID, s.Spec.CPU.String(), s.Spec.Memory.String(), s.Resize.State, s.Resize.Message,
		s.Resize.CPU.String(), s.Resize.Memory.String())
}

// TestResize walks one server through the answers a host gives, checking what Resize returns,
// what Observe shows afterwards, and that every change notifies.
func TestResize(t *testing.T) {
	ctx := context.Background()
	vm := backend.Owner{Namespace: "ns", Name: "vm", UID: "u"}
	b := New()
	var notified int
	if _, err := b.Start(ctx, func(types.NamespacedName) { notified++ }); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, vm, spec("2", "4G")); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() (*backend.Server, error)
		want string // the server as Observe then shows it
		err  string // the infeasible refusal, if any
	}{
		{"taken at once", func() (*backend.Server, error) { return b.Resize(ctx, vm, spec("3", "4G")) },
			`mem-1 3/4G  "" 3/4G`, ""},
		{"deferred", func() (*backend.Server, error) {
			b.AnswerResizes(ResizeAnswer{State: backend.ResizeDeferred, Message: "node is full"})
			return b.Resize(ctx, vm, spec("4", "8G"))
		}, `mem-1 4/8G Deferred "node is full" 3/4G`, ""},
		{"in progress", func() (*backend.Server, error) { return nil, b.Progress(vm, backend.ResizeInProgress, "") },
			`mem-1 4/8G InProgress "" 3/4G`, ""},
		{"done", func() (*backend.Server, error) { return nil, b.Progress(vm, backend.ResizeNone, "") },
			`mem-1 4/8G  "" 4/8G`, ""},
		{"refused", func() (*backend.Server, error) {
			b.AnswerResizes(ResizeAnswer{Refuse: "node didn't have enough allocatable resources: cpu"})
			return b.Resize(ctx, vm, spec("64", "8G"))
		}, `mem-1 4/8G  "" 4/8G`, `resize server vm-server: node didn't have enough allocatable resources: cpu: resize is infeasible`},
		{"root disk", func() (*backend.Server, error) {
			b.AnswerResizes(ResizeAnswer{})
			s := spec("4", "8G")
			s.RootDisk = resource.MustParse("80G")
			return b.Resize(ctx, vm, s)
		}, `mem-1 4/8G  "" 4/8G`, `resize server vm-server: only cpu and memory change in place: resize is infeasible`},
	}
	for _, st := range steps {
		before := notified
		srv, err := st.do()
		if st.err != "" {
			if !errors.Is(err, backend.ErrResizeInfeasible) || err.Error() != st.err {
				t.Fatalf("%s: error %v, want %s", st.name, err, st.err)
			}
			if notified != before {
				t.Errorf("%s: a refused resize notified", st.name)
			}
		} else {
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if srv != nil && report(srv) != st.want {
				t.Errorf("%s: returned %s, want %s", st.name, report(srv), st.want)
			}
			if notified != before+1 {
				t.Errorf("%s: notified %d times, want once", st.name, notified-before)
			}
		}
		obs, err := b.Observe(vm)
		if err != nil {
			t.Fatal(err)
		}
		if report(obs) != st.want {
			t.Errorf("%s: observed %s, want %s", st.name, report(obs), st.want)
		}
	}

	if _, err := b.Resize(ctx, backend.Owner{Namespace: "ns", Name: "other"}, spec("2", "4G")); err == nil || errors.Is(err, backend.ErrResizeInfeasible) {
		t.Errorf("resize without a server: %v, want a plain error", err)
	}
}

func TestParseResize(t *testing.T) {
	tests := map[string]struct {
		in   resizeYAML
		want string // state/message/cpu/memory, or the error
	}{
		"in progress": {resizeYAML{State: "InProgress", CPU: "2", Memory: "4G"}, "InProgress//2/4G"},
		"none":        {resizeYAML{}, "///"},
		"deferred":    {resizeYAML{State: "Deferred", Message: "full", CPU: "500m"}, "Deferred/full/500m/"},
		"bad state":   {resizeYAML{State: "Done"}, `resize.state "Done": want one of Pending, Deferred, Infeasible, InProgress, or none`},
		"bad cpu":     {resizeYAML{State: "Pending", CPU: "two"}, `resize.cpu "two": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := tc.in.parse()
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = fmt.Sprintf("%s/%s/%s/%s", r.State, r.Message, zeroless(r.CPU), zeroless(r.Memory))
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func zeroless(q resource.Quantity) string {
	if q.IsZero() {
		return ""
	}
	return q.String()
}
