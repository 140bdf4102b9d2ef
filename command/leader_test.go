package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/cloudnative-czs/vm-controller/leader"
	"github.com/cloudnative-czs/vm-controller/reconcile"
)

// The wiring of the leader election and its fence into run: the clients it fences, the
// Events it sends before the release. The election and the fence are tested in package
// leader.

func quietCallbacks() leader.Callbacks {
	return leader.Callbacks{SetLeader: func(bool) {}, Healthz: leaderelection.NewLeaderHealthzAdaptor(time.Second)}
}

// TestFencedWritesNeverSent: through the controller's clients, over a real HTTP server, a
// fenced write never reaches the API server, whichever client makes it, and its error is
// ErrFenced through client-go's wrapping; reads go out. The Lease's client is never fenced:
// its renewals are what open the fence. Once this replica leads, writes go out.
func TestFencedWritesNeverSent(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "/leases/"):
			fmt.Fprint(w, `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"vm-controller","namespace":"ns"}}`)
		case strings.Contains(r.URL.Path, "/pods"):
			fmt.Fprint(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns"}}`)
		case strings.Contains(r.URL.Path, "/events"):
			fmt.Fprint(w, `{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"e","namespace":"ns"}}`)
		default:
			fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"b","namespace":"ns"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	writesSeen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var w []string
		for _, s := range seen {
			if !strings.HasPrefix(s, "GET ") {
				w = append(w, s)
			}
		}
		return w
	}

	var refused atomic.Int32
	f := leader.NewFence(3*time.Second, func() { refused.Add(1) })
	cfg := &rest.Config{Host: srv.URL}
	limitQPS(cfg, 0, 100)
	cl, err := newRunClients(cfg, 0, 100, f)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	patch := []byte(`{"metadata":{"labels":{"a":"b"}}}`)
	cm := k8sschema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	writes := map[string]func() error{
		"VM patch": func() error {
			return cl.vmREST.Patch(types.MergePatchType).AbsPath("/apis/cloudnative.czs/v1alpha1/namespaces/ns/virtualmachines/vm").Body(patch).Do(ctx).Error()
		},
		"dynamic patch": func() error {
			_, err := cl.dynamic.Resource(cm).Namespace("ns").Patch(ctx, "b", types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		},
		"pod create": func() error {
			_, err := cl.proto.CoreV1().Pods("ns").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.CreateOptions{})
			return err
		},
		"pod delete": func() error { return cl.proto.CoreV1().Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{}) },
		"Event": func() error {
			_, err := cl.proto.EventsV1().Events("ns").Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{})
			return err
		},
		"usage write": func() error {
			_, err := cl.usage.Resource(cm).Namespace("ns").Patch(ctx, "b", types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, reconcile.ErrFenced) {
			t.Errorf("%s with the fence closed: %v, want ErrFenced", name, err)
		}
	}
	if w := writesSeen(); len(w) != 0 {
		t.Errorf("fenced writes reached the server: %q", w)
	}
	if n := refused.Load(); n != int32(len(writes)) {
		t.Errorf("%d refusals counted, want %d", n, len(writes))
	}
	// Reads go out.
	if _, err := cl.dynamic.Resource(cm).Namespace("ns").Get(ctx, "b", metav1.GetOptions{}); err != nil {
		t.Errorf("read with the fence closed: %v", err)
	}
	// The Lease's client writes whatever the fence says.
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "vm-controller", Namespace: "ns"}}
	if _, err := cl.lease.CoordinationV1().Leases("ns").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("Lease update with the fence closed: %v", err)
	}
	if w := writesSeen(); len(w) != 1 || !strings.HasPrefix(w[0], "PUT ") {
		t.Errorf("writes that reached the server: %q, want the Lease's PUT alone", w)
	}

	// Leading (over a Lease of its own) opens the fence: the writes go out.
	leading, stop := context.WithCancel(ctx)
	defer stop()
	e := leader.Election{Name: "vm-controller", Namespace: "ns", Identity: "me", Lease: 4 * time.Second, Renew: 3 * time.Second,
		Retry: 500 * time.Millisecond, Fence: f}
	err = leader.Lead(leading, fake.NewClientset(), e, quietCallbacks(), slog.New(slog.DiscardHandler), func(context.Context) error {
		for name, write := range writes {
			if err := write(); err != nil {
				t.Errorf("%s with the fence open: %v", name, err)
			}
		}
		stop()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if w := writesSeen(); len(w) != 1+len(writes) {
		t.Errorf("%d writes reached the server with the fence open, want %d: %q", len(w)-1, len(writes), w)
	}
}

// fencedSink stores an Event only while the fence lets writes out, as the fenced transport
// does for the Event's request.
type fencedSink struct {
	slowSink
	f       *leader.Fence
	refused []string
}

func (s *fencedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if err := s.f.Check(); err != nil {
		s.mu.Lock()
		s.refused = append(s.refused, e.Reason)
		s.mu.Unlock()
		return nil, err
	}
	return s.store(ctx, e)
}

// TestLeaderSendsLastEventsBeforeRelease: the Events of a leader's last writes, recorded as its
// work drains on SIGTERM, are sent before it releases its Lease (thenFlush, as run composes
// its work): the release fences every write after it, and they would be refused.
func TestLeaderSendsLastEventsBeforeRelease(t *testing.T) {
	kube := fake.NewClientset()
	f := leader.NewFence(10*time.Second, nil)
	e := leader.Election{Name: "l", Namespace: "ns", Identity: "a", Lease: 15 * time.Second, Renew: 10 * time.Second,
		Retry: 500 * time.Millisecond, Fence: f}
	sink := &fencedSink{f: f}
	s, err := startEvents(sink)
	if err != nil {
		t.Fatal(err)
	}
	defer s.flush(eventsFlushTimeout)
	recorder := s.NewRecorder(scheme.Scheme, "vm-controller")
	regarding := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm", UID: "u1"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = leader.Lead(ctx, kube, e, quietCallbacks(), slog.New(slog.DiscardHandler), thenFlush(func(ctx context.Context) error {
		cancel() // SIGTERM
		<-ctx.Done()
		// the drain's last reconcile
		recorder.Eventf(regarding, nil, corev1.EventTypeNormal, "ServerReady", "Reconcile", "ready")
		return nil
	}, s))
	if err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.stored) != 1 || len(sink.refused) != 0 {
		t.Errorf("the last Event: stored %q, refused %q; want it stored before the release", sink.stored, sink.refused)
	}
}
