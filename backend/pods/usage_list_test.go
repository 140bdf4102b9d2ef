package pods

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// podMetrics is the PodMetrics metrics-server serves for the server pod of VM ns/vm: the pod's
// labels copied (the server pods' LabelVMUID among them) and one container's usage.
func podMetrics(ns, vm, cpu, memory string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
		"metadata":   map[string]any{"name": PodName(vm), "namespace": ns, "labels": map[string]any{LabelVMUID: "uid-" + vm}},
		"containers": []any{map[string]any{"name": ContainerName, "usage": map[string]any{"cpu": cpu, "memory": memory}}},
	}}
}

// usageBackend is a backend whose usage client serves metrics, whose discovery serves
// metrics.k8s.io pods, and whose snapshots age by *now.
func usageBackend(t *testing.T, cfg Config, now *time.Time, metrics ...*unstructured.Unstructured) (*Backend, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{PodMetricsGVR: "PodMetricsList"})
	for _, m := range metrics {
		if err := client.Tracker().Create(PodMetricsGVR, m, m.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	served := []*metav1.APIResourceList{{GroupVersion: "metrics.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "pods", Namespaced: true}}}}
	cfg.Client, cfg.UsageClient = kubefake.NewClientset(), client
	cfg.Discovery = &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: served}}
	b := New(cfg)
	b.usage.now = func() time.Time { return *now }
	return b, client
}

// requests counts the usage client's requests by verb.
func requests(client *dynamicfake.FakeDynamicClient) map[string]int {
	n := map[string]int{}
	for _, a := range client.Actions() {
		n[a.GetVerb()]++
	}
	return n
}

func vmOwner(ns, name string) backend.Owner {
	return backend.Owner{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}
}

// TestUsageListPerWindow: 10,000 VMs, each sampled once over a minute at the default
// --usage-interval (1m), the samples spread evenly as the poller spreads them, cost the
// usage client one list per refresh window (UsageMaxAge: 30s), two in the minute, and no
// read per VM. Before, each sample was a read of its own: 10,000 requests a minute asked
// for, of which --usage-qps (20) let 1,200 through, so that each VM was sampled about every
// 8 minutes.
func TestUsageListPerWindow(t *testing.T) {
	const vms, interval = 10000, time.Minute
	var metrics []*unstructured.Unstructured
	for i := range vms {
		// Two namespaces: the controller watches all, and lists across them.
		metrics = append(metrics, podMetrics(fmt.Sprintf("ns-%d", i%2), fmt.Sprintf("vm-%05d", i), fmt.Sprintf("%dm", i%1000+1), "64Mi"))
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	b, client := usageBackend(t, Config{UsageMaxAge: UsageMaxAge(interval)}, &now, metrics...)
	for i := range vms {
		now = start.Add(time.Duration(i) * interval / vms)
		u, err := b.Usage(context.Background(), vmOwner(fmt.Sprintf("ns-%d", i%2), fmt.Sprintf("vm-%05d", i)))
		if err != nil {
			t.Fatalf("vm-%05d: %v", i, err)
		}
		if got, want := u.CPU.MilliValue(), int64(i%1000+1); got != want || u.Memory.Value() != 64<<20 {
			t.Fatalf("vm-%05d: usage %s/%s, want %dm/64Mi", i, u.CPU.String(), u.Memory.String(), want)
		}
	}
	got := requests(client)
	t.Logf("%d VMs sampled over %s: %d lists, %d gets", vms, interval, got["list"], got["get"])
	if got["list"] != 2 || got["get"] != 0 || len(client.Actions()) != 2 {
		t.Errorf("requests %v, want 2 lists (one per %s) and nothing else", got, UsageMaxAge(interval))
	}
}

// TestUsageMaxAge: half the interval, not under the floor.
func TestUsageMaxAge(t *testing.T) {
	for interval, want := range map[time.Duration]time.Duration{
		time.Minute: 30 * time.Second, 10 * time.Minute: 5 * time.Minute, 2 * time.Second: minUsageAge, 0: minUsageAge,
	} {
		if got := UsageMaxAge(interval); got != want {
			t.Errorf("UsageMaxAge(%s) = %s, want %s", interval, got, want)
		}
	}
}

// metricsServer is an API server that serves pod metrics as lists of up to limit items, each
// page's continue token the index of the next, and records each list's path and query.
func metricsServer(t *testing.T, metrics ...*unstructured.Unstructured) (*httptest.Server, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		q := r.URL.Query()
		from, _ := strconv.Atoi(q.Get("continue"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		to := len(metrics)
		if limit > 0 {
			to = min(from+limit, to)
		}
		list := map[string]any{"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList", "metadata": map[string]any{}}
		if to < len(metrics) {
			list["metadata"] = map[string]any{"continue": strconv.Itoa(to)}
		}
		var items []any
		for _, m := range metrics[from:to] {
			items = append(items, m.Object)
		}
		list["items"] = items
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// TestUsageListScope: the list selects the server pods as the pod informer does (LabelVMUID),
// in the namespace the backend watches or across all, a page of usageListPage at a time, and
// reads every page of a provider that pages (metrics-server does not: it answers every pod at
// once, with no continue token) into the one snapshot.
func TestUsageListScope(t *testing.T) {
	var metrics []*unstructured.Unstructured
	for i := range usageListPage + 1 {
		metrics = append(metrics, podMetrics("vms", fmt.Sprintf("vm-%d", i), fmt.Sprintf("%dm", i+1), "1Mi"))
	}
	query := url.Values{"labelSelector": {LabelVMUID}, "limit": {strconv.Itoa(usageListPage)}}
	tests := map[string]struct {
		namespace string
		path      string
	}{
		"all namespaces": {"", "/apis/metrics.k8s.io/v1beta1/pods"},
		"one namespace":  {"vms", "/apis/metrics.k8s.io/v1beta1/namespaces/vms/pods"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv, seen := metricsServer(t, metrics...)
			client, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			b := New(Config{Client: kubefake.NewClientset(), UsageClient: client, Namespace: tc.namespace})
			for _, i := range []int{0, usageListPage} { // the first page's and the second's
				u, err := b.Usage(context.Background(), vmOwner("vms", fmt.Sprintf("vm-%d", i)))
				if err != nil {
					t.Fatalf("vm-%d: %v", i, err)
				}
				if u.CPU.MilliValue() != int64(i+1) {
					t.Errorf("vm-%d: cpu %s, want %dm", i, u.CPU.String(), i+1)
				}
			}
			next := url.Values{"continue": {strconv.Itoa(usageListPage)}}
			for k, v := range query {
				next[k] = v
			}
			want := []string{tc.path + "?" + query.Encode(), tc.path + "?" + next.Encode()}
			if strings.Join(*seen, "\n") != strings.Join(want, "\n") {
				t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(*seen, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestUsageNotListed: a VM whose pod the list does not show has no figures yet: the pod is
// too new for the provider, or it is not labelled (the list selects on the label, and
// metrics-server copies the pod's); a pod whose figures do not read says why. Neither costs
// a request of its own.
func TestUsageNotListed(t *testing.T) {
	now := time.Now()
	unlabelled := podMetrics("ns", "unlabelled", "10m", "1Mi")
	unlabelled.SetLabels(nil)
	b, client := usageBackend(t, Config{}, &now, podMetrics("ns", "listed", "10m", "1Mi"), unlabelled, podMetrics("ns", "bad", "lots", "1Mi"))
	for vm, want := range map[string]string{"new": "no usage figures", "unlabelled": "no usage figures", "bad": `cpu usage "lots"`} {
		_, err := b.Usage(context.Background(), vmOwner("ns", vm))
		if err == nil || !strings.Contains(err.Error(), want) || errors.Is(err, backend.ErrNoUsage) != (want == "no usage figures") {
			t.Errorf("%s: error %v, want one saying %q", vm, err, want)
		}
	}
	if got := requests(client); got["list"] != 1 || len(client.Actions()) != 1 {
		t.Errorf("requests %v, want one list", got)
	}
}

// TestUsageRefreshed: a sample reads the snapshot until it is UsageMaxAge old, then lists
// the pod metrics again and reads the new figures.
func TestUsageRefreshed(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	b, client := usageBackend(t, Config{UsageMaxAge: 30 * time.Second}, &now, podMetrics("ns", "vm", "100m", "64Mi"))
	vm := vmOwner("ns", "vm")
	sample := func() string {
		t.Helper()
		u, err := b.Usage(context.Background(), vm)
		if err != nil {
			t.Fatal(err)
		}
		return u.CPU.String()
	}
	if got := sample(); got != "100m" {
		t.Fatalf("first sample %s, want 100m", got)
	}
	if err := client.Tracker().Update(PodMetricsGVR, podMetrics("ns", "vm", "300m", "64Mi"), "ns"); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at    time.Duration
		cpu   string
		lists int
	}{
		{30*time.Second - time.Nanosecond, "100m", 1}, // still fresh: the snapshot's figures
		{30 * time.Second, "300m", 2},                 // stale: listed again
		{59 * time.Second, "300m", 2},
	} {
		now = start.Add(step.at)
		if got := sample(); got != step.cpu || requests(client)["list"] != step.lists {
			t.Errorf("at %s: usage %s after %d lists, want %s after %d", step.at, got, requests(client)["list"], step.cpu, step.lists)
		}
	}
}

// TestUsageListFailureKept: a list that fails is the answer of every sample until the
// window ends, not tried again by each: at 10,000 VMs, a failing list per sample would be
// 10,000 lists of every pod.
func TestUsageListFailureKept(t *testing.T) {
	start := time.Now()
	now := start
	b, client := usageBackend(t, Config{UsageMaxAge: 30 * time.Second}, &now, podMetrics("ns", "vm", "100m", "64Mi"))
	fail := true
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is sad"))
		}
		return false, nil, nil
	})
	for i := range 10 {
		if _, err := b.Usage(context.Background(), vmOwner("ns", "vm")); err == nil || !strings.Contains(err.Error(), "etcd is sad") {
			t.Fatalf("sample %d: error %v, want the list's", i, err)
		}
	}
	fail = false
	now = start.Add(30 * time.Second)
	if _, err := b.Usage(context.Background(), vmOwner("ns", "vm")); err != nil {
		t.Fatalf("the next window: %v", err)
	}
	if got := requests(client); got["list"] != 2 || len(client.Actions()) != 2 {
		t.Errorf("requests %v, want one list per window", got)
	}
}

// TestUsageListForbidden: where RBAC grants get but not list on pods.metrics.k8s.io, each
// VM's pod is read on its own, as before the list, and one line says so, however many
// windows are refused; once a list is let through, the snapshot is back, and a line says
// that too.
func TestUsageListForbidden(t *testing.T) {
	start := time.Now()
	now := start
	var logged bytes.Buffer
	b, client := usageBackend(t, Config{UsageMaxAge: 30 * time.Second, Log: slog.New(slog.NewTextHandler(&logged, nil))}, &now,
		podMetrics("ns", "a", "10m", "1Mi"), podMetrics("ns", "b", "20m", "2Mi"))
	forbid := true
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if forbid {
			return true, nil, apierrors.NewForbidden(PodMetricsGVR.GroupResource(), "", errors.New(`User "system:serviceaccount:vms:vm-controller" cannot list resource "pods" in API group "metrics.k8s.io"`))
		}
		return false, nil, nil
	})
	sampleAll := func(window int) {
		t.Helper()
		now = start.Add(time.Duration(window) * 30 * time.Second)
		for vm, want := range map[string]string{"a": "10m", "b": "20m"} {
			u, err := b.Usage(context.Background(), vmOwner("ns", vm))
			if err != nil {
				t.Fatalf("window %d, %s: %v", window, vm, err)
			}
			if u.CPU.String() != want {
				t.Errorf("window %d, %s: cpu %s, want %s", window, vm, u.CPU.String(), want)
			}
		}
	}
	sampleAll(0)
	sampleAll(1)
	if got := requests(client); got["list"] != 2 || got["get"] != 4 {
		t.Errorf("refused: requests %v, want a list per window and a get per sample", got)
	}
	if n := strings.Count(logged.String(), "RBAC denies list on pods.metrics.k8s.io"); n != 1 {
		t.Errorf("the refusal logged %d times, want once:\n%s", n, logged.String())
	}
	forbid = false
	sampleAll(2)
	sampleAll(3)
	if got := requests(client); got["list"] != 4 || got["get"] != 4 {
		t.Errorf("let through: requests %v, want a list per window and no more gets", got)
	}
	if n := strings.Count(logged.String(), "Pod metrics are listed again"); n != 1 {
		t.Errorf("the list's return logged %d times, want once:\n%s", n, logged.String())
	}
}

// TestUsageSingleFlight: samples that find the snapshot stale while a list is under way wait
// for that list instead of listing each; one whose context ends stops waiting.
func TestUsageSingleFlight(t *testing.T) {
	const callers = 8
	now := time.Now()
	b, client := usageBackend(t, Config{}, &now, podMetrics("ns", "vm", "10m", "1Mi"))
	looked := make(chan struct{}, callers+1)
	b.usage.now = func() time.Time { looked <- struct{}{}; return now }
	release := make(chan struct{})
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-release // the fake holds its lock meanwhile: another list waits to be counted
		return false, nil, nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := b.Usage(context.Background(), vmOwner("ns", "vm"))
			errs <- err
		})
	}
	// Every caller has found the snapshot stale (each asks the clock once, under the
	// cache's lock): from there, each either waits for the list under way or lists itself.
	for range callers {
		<-looked
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cancelled := make(chan error, 1)
	wg.Go(func() {
		_, err := b.Usage(ctx, vmOwner("ns", "vm"))
		cancelled <- err
	})
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a sample whose context ended while the list was under way: error %v, want its context's", err)
		}
	case <-time.After(time.Minute):
		t.Error("a sample whose context ended went on waiting for the list")
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := requests(client); got["list"] != 1 || len(client.Actions()) != 1 {
		t.Errorf("%d concurrent samples made requests %v, want one list", callers, got)
	}
}

// TestUsageListCutShortNotKept: a list cut short by its caller's own end (the sample's
// deadline, a drain) says nothing of the metrics API: it is not every VM's answer for the
// window, and the next sample lists again; a failure of the API's own is kept for the window.
func TestUsageListCutShortNotKept(t *testing.T) {
	now := time.Now()
	b, client := usageBackend(t, Config{UsageMaxAge: 30 * time.Second}, &now, podMetrics("ns", "vm", "100m", "64Mi"))
	ctx, cancel := context.WithCancel(context.Background())
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if ctx.Err() == nil {
			cancel() // the caller's end comes while its list is under way
			return true, nil, context.Canceled
		}
		return false, nil, nil
	})
	if _, err := b.Usage(ctx, vmOwner("ns", "vm")); err == nil {
		t.Fatal("the sample cut short: no error")
	}
	u, err := b.Usage(context.Background(), vmOwner("ns", "vm"))
	if err != nil || u.CPU.MilliValue() != 100 {
		t.Fatalf("the next sample: %v, %v; want the usage, listed again", u, err)
	}
	if got := requests(client); got["list"] != 2 {
		t.Errorf("requests %v, want a second list", got)
	}
}
