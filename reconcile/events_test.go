package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
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
