package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

func TestWarningsOnly(t *testing.T) {
	fake := events.NewFakeRecorder(10)
	r := WarningsOnly(fake)
	ref := &corev1.ObjectReference{Kind: "VirtualMachine", Name: "a"}
	r.Eventf(ref, nil, corev1.EventTypeNormal, decision.ReasonCreatingServer, "CreateServer", "Creating a server")
	r.Eventf(ref, nil, corev1.EventTypeWarning, decision.ReasonServerFailed, "UpdateStatus", "Server %s failed", "a-server")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	if len(got) != 1 || got[0] != "Warning ServerFailed Server a-server failed" {
		t.Errorf("recorded %q; want only the Warning", got)
	}
}

// fakeSink answers Events as the API server would for namespaces in terminating: refused,
// with the NamespaceTerminating cause.
type fakeSink struct {
	terminating map[string]bool
	requests    []string // "verb namespace"
}

func (f *fakeSink) answer(verb string, e *eventsv1.Event) (*eventsv1.Event, error) {
	f.requests = append(f.requests, verb+" "+e.Namespace)
	if !f.terminating[e.Namespace] {
		return e, nil
	}
	err := apierrors.NewForbidden(k8sschema.GroupResource{Group: "events.k8s.io", Resource: "events"}, e.Name,
		errors.New("unable to create new content in namespace "+e.Namespace+" because it is being terminated"))
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	return nil, err
}

func (f *fakeSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return f.answer("create", e)
}
func (f *fakeSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return f.answer("update", e)
}
func (f *fakeSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return f.answer("patch", e)
}

// TestSkipTerminatingNamespaces: the first Event refused because its namespace is being
// deleted is answered as a success, and the namespace's next Events are dropped without a
// request, for goneNamespaceFor; other namespaces' Events and other errors pass through.
func TestSkipTerminatingNamespaces(t *testing.T) {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	f := &fakeSink{terminating: map[string]bool{"going": true}}
	s := SkipTerminatingNamespaces(f, slog.New(slog.DiscardHandler), func() time.Time { return at })
	ev := func(ns string) *eventsv1.Event {
		return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: ns}}
	}
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Create(ctx, ev("going")); err != nil {
			t.Fatalf("create %d in a namespace being deleted: %v", i, err)
		}
		if _, err := s.Patch(ctx, ev("going"), nil); err != nil {
			t.Fatalf("patch %d in a namespace being deleted: %v", i, err)
		}
		if _, err := s.Create(ctx, ev("staying")); err != nil {
			t.Fatalf("create %d elsewhere: %v", i, err)
		}
	}
	if got, want := strings.Join(f.requests, ","), "create going,create staying,create staying,create staying"; got != want {
		t.Errorf("requests %s, want %s", got, want)
	}
	at = at.Add(goneNamespaceFor + time.Second)
	if _, err := s.Update(ctx, ev("going")); err != nil {
		t.Fatal(err)
	}
	if got := f.requests[len(f.requests)-1]; got != "update going" {
		t.Errorf("after goneNamespaceFor the last request is %q, want the namespace asked again", got)
	}
	// Another refusal is the caller's to see.
	other := &failingSink{err: apierrors.NewBadRequest("malformed")}
	if _, err := SkipTerminatingNamespaces(other, slog.New(slog.DiscardHandler), time.Now).Create(ctx, ev("x")); !apierrors.IsBadRequest(err) {
		t.Errorf("a bad request came back as %v", err)
	}
}

type failingSink struct{ err error }

func (f failingSink) Create(context.Context, *eventsv1.Event) (*eventsv1.Event, error) {
	return nil, f.err
}
func (f failingSink) Update(context.Context, *eventsv1.Event) (*eventsv1.Event, error) {
	return nil, f.err
}
func (f failingSink) Patch(context.Context, *eventsv1.Event, []byte) (*eventsv1.Event, error) {
	return nil, f.err
}

// podServers is the memory backend, its servers said to be Pods (backend.Objects) as the pods
// backend's are.
type podServers struct{ *memory.Backend }

func (podServers) ServerKind() (apiVersion, kind string) { return "v1", "Pod" }

// sentEvents starts client-go's events broadcaster, as run does, over a fake clientset: it
// returns a recorder through it and the Events stored so far, listed when called.
func sentEvents(t *testing.T) (events.EventRecorder, func() []eventsv1.Event) {
	t.Helper()
	client := kubefake.NewClientset()
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(); cancel() })
	return b.NewRecorder(scheme.Scheme, "vm-controller"), func() []eventsv1.Event {
		l, err := client.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
}

// waitEvents waits for the Events stored to be as want says, and returns them rendered
// "reason xCOUNT related-name@version: note", one a line, sorted, the last it saw.
func waitEvents(list func() []eventsv1.Event, want func([]string) bool) []string {
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		got = got[:0]
		for _, e := range list() {
			count := int32(1)
			if e.Series != nil {
				count = e.Series.Count
			}
			related := "-"
			if r := e.Related; r != nil {
				related = r.Kind + "/" + r.Name + "@" + r.ResourceVersion
			}
			got = append(got, fmt.Sprintf("%s x%d %s: %s", e.Reason, count, related, e.Note))
		}
		slices.Sort(got)
		if want(got) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEventsOfNewServers: each server's Events are its own. Two servers made one after the
// other (the second replacing the first, gone in between) each have a CreatingServer Event,
// with the same note, not one Event counted twice that names the first server only.
func TestEventsOfNewServers(t *testing.T) {
	w := newWorld(t, "create-new")
	vm := w.view(t, "create-new")
	recorder, list := sentEvents(t)
	a := w.applier()
	a.backend, a.recorder = podServers{w.servers}, recorder
	spec := backend.Spec{CPU: resource.MustParse("2"), Memory: resource.MustParse("4G"), RootDisk: resource.MustParse("40G"), Image: "img"}
	create := decision.Plan{Server: &decision.ServerAction{Op: decision.CreateServer, Spec: &spec,
		Event: decision.Event{Type: decision.EventNormal, Reason: decision.ReasonCreatingServer, Message: "Creating a server with cpu 2, memory 4G, root disk 40G"}}}
	ctx := context.Background()
	if _, err := a.apply(ctx, vm, ownerOf(vm), nil, nil, create); err != nil {
		t.Fatal(err)
	}
	w.servers.Set(ownerOf(vm), nil) // gone: the next plan replaces it
	if _, err := a.apply(ctx, vm, ownerOf(vm), nil, nil, create); err != nil {
		t.Fatal(err)
	}
	got := waitEvents(list, func(got []string) bool { return len(got) == 2 })
	one := "CreatingServer x1 Pod/" + vm.Name() + "-server@: Creating a server with cpu 2, memory 4G, root disk 40G"
	want := []string{one, one}
	if !slices.Equal(got, want) {
		t.Errorf("Events stored:\n%s\nwant one for each server:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	uids := map[types.UID]bool{}
	for _, e := range list() {
		if e.Related != nil {
			uids[e.Related.UID] = true
		}
	}
	if len(uids) != 2 {
		t.Errorf("the Events name servers %v, want the two servers made", uids)
	}
}

// TestEventsOfOneServer: Events about one server that say something new, two resizes to
// different sizes, are each written with their own note; the same Event made again of the
// server as it was (a resize asked again of the same view) is one Event with count 2.
func TestEventsOfOneServer(t *testing.T) {
	w := newWorld(t, "create-new")
	vm := w.view(t, "create-new")
	recorder, list := sentEvents(t)
	a := w.applier()
	a.backend, a.recorder = podServers{w.servers}, recorder
	spec := func(cpu string) *backend.Spec {
		return &backend.Spec{CPU: resource.MustParse(cpu), Memory: resource.MustParse("4G"), RootDisk: resource.MustParse("40G"), Image: "img"}
	}
	srv := &backend.Server{Name: "test-vm-server", ID: "uid-1", Version: "10", State: backend.StateReady, Spec: *spec("500m")}
	w.servers.Set(ownerOf(vm), srv)
	resize := func(seen *backend.Server, from, to string) {
		t.Helper()
		plan := decision.Plan{Server: &decision.ServerAction{Op: decision.ResizeServer, Spec: spec(to),
			Event: decision.Event{Type: decision.EventNormal, Reason: decision.ReasonResizingServer,
				Message: fmt.Sprintf("Resizing server test-vm-server: cpu %s -> %s", from, to)}}}
		if _, err := a.apply(context.Background(), vm, ownerOf(vm), seen, nil, plan); err != nil {
			t.Fatal(err)
		}
	}
	resize(srv, "500m", "600m")
	resized := *srv
	resized.Version, resized.Spec = "14", *spec("600m")
	resize(&resized, "600m", "700m")
	resize(&resized, "600m", "700m") // decided again on the same view: a repeat
	want := []string{
		"ResizingServer x1 Pod/test-vm-server@10: Resizing server test-vm-server: cpu 500m -> 600m",
		"ResizingServer x2 Pod/test-vm-server@14: Resizing server test-vm-server: cpu 600m -> 700m",
	}
	got := waitEvents(list, func(got []string) bool { return slices.Equal(got, want) })
	if !slices.Equal(got, want) {
		t.Errorf("Events stored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNamed: the Events written with a status are about the server it names, as the plan
// found or made it.
func TestNamed(t *testing.T) {
	made := &backend.Server{Name: "vm-server", ID: "new", Version: "7"}
	seen := &backend.Server{Name: "vm-server", ID: "old", Version: "3"}
	tests := map[string]struct {
		status *schema.ServerStatus // the server the status names
		want   *backend.Server
	}{
		"none":             {status: nil, want: nil},
		"the one made":     {status: &schema.ServerStatus{Name: "vm-server", ID: "new"}, want: made},
		"the one observed": {status: &schema.ServerStatus{Name: "vm-server", ID: "old"}, want: seen},
		// Of no version known: an Event about it folds into the last one's about it.
		"another": {status: &schema.ServerStatus{Name: "vm-server", ID: "other"}, want: &backend.Server{Name: "vm-server", ID: "other"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := named(tt.status, made, seen)
			if (got == nil) != (tt.want == nil) || got != nil && !reflect.DeepEqual(*got, *tt.want) {
				t.Errorf("named = %+v, want %+v", got, tt.want)
			}
		})
	}
}
