package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
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
	a.useBackend(podServers{w.servers})
	a.recorder = recorder
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
	a.useBackend(podServers{w.servers})
	a.recorder = recorder
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

// podObjects is the memory backend, its servers, disks and budgets said to be Pods,
// PersistentVolumeClaims and PodDisruptionBudgets (backend.Objects, DiskObjects,
// BudgetObjects) as the pods backend's are.
type podObjects struct{ podServers }

func (podObjects) DiskKind() (apiVersion, kind string)   { return "v1", "PersistentVolumeClaim" }
func (podObjects) BudgetKind() (apiVersion, kind string) { return "policy/v1", "PodDisruptionBudget" }

// TestEventsOfOneDisk: Events of actions on one disk that change it, two growths one after
// the other, are each written with their own note, as a server's are (TestEventsOfOneServer):
// they named no related object, and the second was counted in the first, whose note ("from
// 40G to 60G") stayed. Each names the claim as the action found it. The same Event made
// again of the claim as it was (a create that finds the claim it made) still folds.
func TestEventsOfOneDisk(t *testing.T) {
	w := newWorld(t, "create-new")
	vm := w.view(t, "create-new")
	recorder, list := sentEvents(t)
	a := w.applier()
	a.useBackend(podObjects{podServers{w.servers}})
	a.recorder, a.disks = recorder, newDiskExpectations()
	w.servers.BindDisks(true)
	owner := ownerOf(vm)
	ctx := context.Background()
	apply := func(seen *backend.Disk, act decision.DiskAction) {
		t.Helper()
		if _, err := a.apply(ctx, vm, owner, nil, seen, decision.Plan{Disk: &act}); err != nil {
			t.Fatal(err)
		}
	}
	observe := func() *backend.Disk {
		t.Helper()
		d, err := w.servers.ObserveDisk(owner)
		if err != nil || d == nil {
			t.Fatalf("observe disk: %v, %v", d, err)
		}
		return d
	}
	size := func(s string) *backend.DiskSpec { return &backend.DiskSpec{Size: resource.MustParse(s)} }
	event := func(reason, note string) decision.Event {
		return decision.Event{Type: decision.EventNormal, Reason: reason, Message: note}
	}
	create := decision.DiskAction{Op: decision.CreateDisk, Spec: size("40G"),
		Event: event(decision.ReasonCreatingDisk, "Creating disk test-vm-rootdisk of 40G")}
	apply(nil, create)
	made := observe()
	apply(nil, create) // decided again before the cache showed the claim: the create finds it as made
	grow := func(from, to string) {
		t.Helper()
		apply(observe(), decision.DiskAction{Op: decision.ExpandDisk, Spec: size(to),
			Event: event(decision.ReasonResizingDisk, fmt.Sprintf("Resizing disk test-vm-rootdisk from %s to %s", from, to))})
	}
	grow("40G", "60G")
	grown := observe()
	grow("60G", "70G")
	name := memory.DiskName(vm.Name())
	want := []string{
		"CreatingDisk x2 PersistentVolumeClaim/" + name + "@" + made.Version + ": Creating disk test-vm-rootdisk of 40G",
		"ResizingDisk x1 PersistentVolumeClaim/" + name + "@" + made.Version + ": Resizing disk test-vm-rootdisk from 40G to 60G",
		"ResizingDisk x1 PersistentVolumeClaim/" + name + "@" + grown.Version + ": Resizing disk test-vm-rootdisk from 60G to 70G",
	}
	got := waitEvents(list, func(got []string) bool { return slices.Equal(got, want) })
	if !slices.Equal(got, want) {
		t.Errorf("Events stored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range list() {
		if r := e.Related; r == nil || r.UID != types.UID(made.ID) || r.Namespace != vm.Namespace() {
			t.Errorf("%s names %+v, want the claim %s in %s", e.Reason, r, made.ID, vm.Namespace())
		}
	}
}

// TestEventsOfBudgets: a budget made again after its deletion (the strategy Block set, unset
// and set again within six minutes) has a CreatingBudget of its own, not one counted in the
// first budget's; a create that finds the budget it made folds into the first.
func TestEventsOfBudgets(t *testing.T) {
	w := newWorld(t, "create-new")
	vm := w.view(t, "create-new")
	recorder, list := sentEvents(t)
	a := w.applier()
	a.useBackend(podObjects{podServers{w.servers}})
	a.recorder = recorder
	owner := ownerOf(vm)
	ctx := context.Background()
	apply := func(act decision.BudgetAction) {
		t.Helper()
		if _, err := a.apply(ctx, vm, owner, nil, nil, decision.Plan{Budget: &act}); err != nil {
			t.Fatal(err)
		}
	}
	name := memory.BudgetName(vm.Name())
	create := decision.BudgetAction{Op: decision.CreateBudget,
		Event: decision.Event{Type: decision.EventNormal, Reason: decision.ReasonCreatingBudget, Message: "Creating disruption budget " + name}}
	remove := decision.BudgetAction{Op: decision.DeleteBudget, Name: name,
		Event: decision.Event{Type: decision.EventNormal, Reason: decision.ReasonDeletingBudget, Message: "Deleting disruption budget " + name}}
	apply(create)
	apply(create) // the create asked again finds the budget it made
	apply(remove)
	apply(create)
	budget := "PodDisruptionBudget/" + name + "@"
	want := []string{
		"CreatingBudget x1 " + budget + ": Creating disruption budget " + name,
		"CreatingBudget x2 " + budget + ": Creating disruption budget " + name,
		"DeletingBudget x1 " + budget + ": Deleting disruption budget " + name,
	}
	got := waitEvents(list, func(got []string) bool { return slices.Equal(got, want) })
	if !slices.Equal(got, want) {
		t.Errorf("Events stored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The first budget's create, counted twice, and its delete name it; the second's create
	// names the second (the memory backend's IDs count creations).
	uids := map[string]types.UID{}
	for _, e := range list() {
		count := int32(1)
		if e.Series != nil {
			count = e.Series.Count
		}
		if e.Related != nil {
			uids[fmt.Sprintf("%s x%d", e.Reason, count)] = e.Related.UID
		}
	}
	wantUIDs := map[string]types.UID{"CreatingBudget x2": "budget-1", "DeletingBudget x1": "budget-1", "CreatingBudget x1": "budget-2"}
	if !reflect.DeepEqual(uids, wantUIDs) {
		t.Errorf("the Events name budgets %v, want %v", uids, wantUIDs)
	}
}

// TestEventNoteKeepsTheCommand: an Event whose message passes the note's limit (eventNoteLimit)
// keeps in its note the command its message ends with, whole: ResizeNoRoom of
// claim/placement-pinned-no-room, whose message names the VM four times, decided for a VM of
// a 100-byte name in a namespace of 63, comes to some 1200 bytes, and a note cut at its end
// broke `kubectl vm restart NAME -n NS` mid-name. The note keeps its start and its end, the
// cut marked between them.
func TestEventNoteKeepsTheCommand(t *testing.T) {
	name, ns := "vm-"+strings.Repeat("a", 96)+"z", "ns-"+strings.Repeat("b", 59)+"z"
	rename := strings.NewReplacer("test-vm", name, "namespace: default", "namespace: "+ns)
	dir := t.TempDir()
	for _, f := range []string{"claim/placement-pinned-no-room.txtar", "claim/base.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "testdata", "decide", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(rename.Replace(string(raw))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "placement-pinned-no-room.txtar")
	vm, srv := decidecase.Read(t, file)
	plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Server: srv, Disk: decidecase.Disk(t, file), Hosts: decidecase.Hosts(t, file), Now: decidecase.Now})
	command := "kubectl vm restart " + name + " -n " + ns
	if len(plan.Events) != 1 || plan.Events[0].Reason != decision.ReasonResizeNoRoom || len(plan.Events[0].Message) <= eventNoteLimit ||
		!strings.Contains(plan.Events[0].Message, command) {
		t.Fatalf("events %+v, want one ResizeNoRoom longer than %d bytes that gives %q", plan.Events, eventNoteLimit, command)
	}
	fake := events.NewFakeRecorder(1)
	applier{recorder: fake}.recordRelated(vm, nil, plan.Events...)
	note := strings.TrimPrefix(<-fake.Events, "Normal ResizeNoRoom ")
	msg := plan.Events[0].Message
	head, tail, cut := strings.Cut(note, " [...] ")
	if len(note) > eventNoteLimit || !strings.Contains(note, command) || !cut || !strings.HasPrefix(msg, head) || !strings.HasSuffix(msg, tail) {
		t.Errorf("note of %d bytes %q\nwant at most %d, the start and the end of the message around [...], with %q whole", len(note), note, eventNoteLimit, command)
	}
}
