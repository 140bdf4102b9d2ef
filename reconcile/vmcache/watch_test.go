package vmcache

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache/vmcachetest"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// goldenVMs are the VMs of every golden case, as JSON, with a resourceVersion and some of what
// the API server adds that no view reads (labels, annotations, managedFields).
func goldenVMs(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for i, f := range decidecase.Files(t, filepath.Join("..", "..", "testdata", "decide")) {
		raw, _ := decidecase.Input(t, f)
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		u.SetResourceVersion(fmt.Sprint(100 + i))
		u.SetLabels(map[string]string{"team": "a<b>&c"})
		ann := u.GetAnnotations() // the case's own (the restart annotation) stay
		if ann == nil {
			ann = map[string]string{}
		}
		ann["kubectl.kubernetes.io/last-applied-configuration"] = string(raw)
		u.SetAnnotations(ann)
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1"}})
		b, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".txtar")] = b
	}
	return out
}

// viaUnstructured is the cached form the old path made: client-go's unstructured decode, then
// Compact.
func viaUnstructured(t testing.TB, raw []byte) *Object {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	o, err := Compact(u, decidecase.Fields(t))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func viaWire(t testing.TB, raw []byte) *Object {
	t.Helper()
	c := compactor{fields: decidecase.Fields(t)}
	o, err := c.object(gjson.ParseBytes(raw), false)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// sameObject fails unless a and b have the same metadata and the same JSON, read as values
// (the two paths may order keys or escape characters differently, which no view sees).
func sameObject(t *testing.T, name string, a, b *Object) {
	t.Helper()
	if a.GetNamespace() != b.GetNamespace() || a.name != b.name || a.uid != b.uid || a.resourceVersion != b.resourceVersion {
		t.Errorf("%s: metadata %q/%q/%q/%q, want %q/%q/%q/%q", name, a.GetNamespace(), a.name, a.uid, a.resourceVersion,
			b.GetNamespace(), b.name, b.uid, b.resourceVersion)
	}
	var av, bv any
	if err := json.Unmarshal(rawOf(t, a), &av); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := json.Unmarshal(rawOf(t, b), &bv); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !reflect.DeepEqual(av, bv) {
		t.Errorf("%s: JSON\n%s\nwant\n%s", name, rawOf(t, a), rawOf(t, b))
	}
}

// TestWireMatchesCompact: for every golden VM, the object decoded from the wire is the one the
// old path (unstructured, then Compact) made, and every view of it reads the same.
func TestWireMatchesCompact(t *testing.T) {
	f := decidecase.Fields(t)
	for name, raw := range goldenVMs(t) {
		got, want := viaWire(t, raw), viaUnstructured(t, raw)
		sameObject(t, name, got, want)
		if g, w := readOf(mustView(t, got, f)), readOf(mustView(t, want, f)); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: view reads\n%+v\nwant\n%+v", name, g, w)
		}
		if bytes.Contains(rawOf(t, got), []byte("managedFields")) || bytes.Contains(rawOf(t, got), []byte("last-applied")) {
			t.Errorf("%s: kept what no view reads: %s", name, rawOf(t, got))
		}
	}
}

// TestWatchDecoder reads a stream of every kind of event.
func TestWatchDecoder(t *testing.T) {
	vms := goldenVMs(t)
	vm := vms["create-new"]
	stream := fmt.Sprintf(`{"type":"ADDED","object":%s}
{"type":"MODIFIED","object":%s}{"type":"BOOKMARK","object":{"kind":"VirtualMachine","metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}}}
{"type":"DELETED","object":%s}
{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"too old"}}
`, vm, vms["active-steady"], vm)
	// Read whole, and one byte at a time: an event cut across reads decodes the same.
	for _, r := range []io.Reader{strings.NewReader(stream), iotest.OneByteReader(strings.NewReader(stream))} {
		got := decodeAll(t, r)
		want := []string{
			"ADDED default/test-vm rv=" + viaUnstructured(t, vm).resourceVersion + " end=",
			"MODIFIED default/test-vm rv=" + viaUnstructured(t, vms["active-steady"]).resourceVersion + " end=",
			"BOOKMARK / rv=7 end=true",
			"DELETED default/test-vm rv=" + viaUnstructured(t, vm).resourceVersion + " end=",
			"ERROR Expired 410",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("events\n%q\nwant\n%q", got, want)
		}
	}
	// A stream cut inside an event ends with an error, not a silent end.
	d := newWatchDecoder(io.NopCloser(strings.NewReader(stream[:40])), decidecase.Fields(t))
	if _, _, err := d.Decode(); err != io.ErrUnexpectedEOF {
		t.Errorf("cut stream: %v, want %v", err, io.ErrUnexpectedEOF)
	}
	// What the cache would keep must be valid JSON, the resourceVersion a string.
	for _, bad := range []string{
		`{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"},"spec":{"cpu":tru}}}`,
		`{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"},"spec":{"cpu":"1",}}}`,
		`{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":1},"spec":{}}}`,
		`{"type":"ERROR","object":{"code":41x}}`,
	} {
		d := newWatchDecoder(io.NopCloser(strings.NewReader(bad)), decidecase.Fields(t))
		if _, _, err := d.Decode(); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
			t.Errorf("%s: %v, want not valid JSON", bad, err)
		}
	}
}

// decodeAll decodes a watch stream to its end, one line per event.
func decodeAll(t *testing.T, r io.Reader) []string {
	t.Helper()
	d := newWatchDecoder(io.NopCloser(r), decidecase.Fields(t))
	defer d.Close()
	// Every event is decoded before any is read, as the reflector may read one while the
	// decoder is on the next: nothing an event holds may share the decoder's buffer.
	var events []watch.Event
	for {
		typ, obj, err := d.Decode()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, watch.Event{Type: typ, Object: obj})
	}
	var got []string
	for _, e := range events {
		typ := e.Type
		switch o := e.Object.(type) {
		case *Object:
			got = append(got, fmt.Sprintf("%s %s/%s rv=%s end=%v", typ, o.GetNamespace(), o.name, o.resourceVersion, o.GetAnnotations()[metav1.InitialEventsAnnotationKey]))
		case *metav1.Status:
			got = append(got, fmt.Sprintf("%s %s %d", typ, o.Reason, o.Code))
		}
	}
	return got
}

// TestInformerOverWire runs client-go's informer over the VM ListerWatcher against a server
// speaking the real JSON, with and without watch lists: the cache fills from the first list,
// then follows updates and deletes, each object the compact form.
func TestInformerOverWire(t *testing.T) {
	for _, watchList := range []bool{true, false} {
		t.Run(fmt.Sprintf("watchList=%v", watchList), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			vms := goldenVMs(t)
			first, second := vmcachetest.Rename(t, vms["create-new"], "vm1", "150"), vmcachetest.Rename(t, vms["active-steady"], "vm2", "200")
			s := &vmcachetest.APIServer{T: t, Initial: [][]byte{first, second}, RV: "200", Events: make(chan string)}
			srv := httptest.NewServer(s)
			defer srv.Close()
			defer close(s.Events)
			client, err := RESTClientFor(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
			lw := &ListerWatcher{Client: client, GVR: gvr, Namespace: "default", Selector: vmcachetest.Selector}
			inf := cache.NewSharedIndexInformer(lw, &Object{}, 0, cache.Indexers{})
			seen := make(chan string, 10)
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: func(o any) { seen <- "add " + o.(*Object).name + " " + o.(*Object).resourceVersion },
				UpdateFunc: func(_, o any) {
					seen <- "update " + o.(*Object).name + " " + o.(*Object).resourceVersion
				},
				DeleteFunc: func(o any) { seen <- "delete " + o.(*Object).name },
			}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go inf.RunWithContext(ctx)
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("not synced")
			}
			// The initial adds come in no promised order.
			adds := []string{<-seen, <-seen}
			slices.Sort(adds)
			wantAdds := []string{"add vm1 150", "add vm2 200"}
			if !reflect.DeepEqual(adds, wantAdds) {
				t.Errorf("adds %q, want %q", adds, wantAdds)
			}
			for _, raw := range [][]byte{first, second} {
				want := viaUnstructured(t, raw)
				got, ok, err := inf.GetStore().GetByKey("default/" + want.name)
				if err != nil || !ok {
					t.Fatalf("%s not cached: %v", want.name, err)
				}
				sameObject(t, want.name, got.(*Object), want)
			}

			updated := vmcachetest.Rename(t, first, "vm1", "201")
			s.Events <- fmt.Sprintf(`{"type":"MODIFIED","object":%s}`, updated)
			if got := <-seen; got != "update vm1 201" {
				t.Errorf("got %q, want the update", got)
			}
			s.Events <- fmt.Sprintf(`{"type":"DELETED","object":%s}`, vmcachetest.Rename(t, second, "vm2", "202"))
			if got := <-seen; got != "delete vm2" {
				t.Errorf("got %q, want the delete", got)
			}
			if keys := inf.GetStore().ListKeys(); !reflect.DeepEqual(keys, []string{"default/vm1"}) {
				t.Errorf("cached %q", keys)
			}
			got, _, _ := inf.GetStore().GetByKey("default/vm1")
			sameObject(t, "vm1", got.(*Object), viaUnstructured(t, updated))

			asked := s.Asked()[0]
			want := "list"
			if watchList {
				want = "watchlist"
			}
			if asked != want {
				t.Errorf("first request %s, want %s", asked, want)
			}
		})
	}
}

// TestFrameReader cuts streams whose strings hold what could end a frame early: braces,
// escaped quotes, backslashes before a closing quote, read whole and one byte at a time.
func TestFrameReader(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		want         []string
	}{
		{"two objects on lines", "{\"a\":1}\n{\"b\":2}\n", []string{`{"a":1}`, `{"b":2}`}},
		{"no space between", `{"a":1}{"b":[1,{"c":2}]}`, []string{`{"a":1}`, `{"b":[1,{"c":2}]}`}},
		{"whitespace around", " \t\r\n{\"a\":1} \n ", []string{`{"a":1}`}},
		{"braces in a string", `{"a":"}{]["}{"b":"{"}`, []string{`{"a":"}{]["}`, `{"b":"{"}`}},
		{"escaped quote", `{"a":"x\"}y"}{"b":1}`, []string{`{"a":"x\"}y"}`, `{"b":1}`}},
		{"backslash before the closing quote", `{"a":"x\\"}{"b":"\\\\"}`, []string{`{"a":"x\\"}`, `{"b":"\\\\"}`}},
		{"escaped backslash then escaped quote", `{"a":"\\\"}"}`, []string{`{"a":"\\\"}"}`}},
		{"empty string and key", `{"":""}{"a":""}`, []string{`{"":""}`, `{"a":""}`}},
	} {
		for _, one := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tc.stream)
			if one {
				r = iotest.OneByteReader(r)
			}
			f := frameReader{r: r}
			var got []string
			for {
				b, err := f.next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s (one byte at a time: %v): %v", tc.name, one, err)
				}
				got = append(got, string(b))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s (one byte at a time: %v):\n got %q\nwant %q", tc.name, one, got, tc.want)
			}
		}
	}
	for _, bad := range []string{`{"a":1}x`, `{"a":"}`} {
		f := frameReader{r: strings.NewReader(bad)}
		_, err := f.next()
		if err == nil {
			_, err = f.next()
		}
		if err == nil || err == io.EOF {
			t.Errorf("%q: got %v, want an error", bad, err)
		}
	}
}

// TestFrameReaderObject: the frame reader finds a watch event's "object" where the event has
// exactly one object behind that key, and leaves any other shape to gjson.
func TestFrameReaderObject(t *testing.T) {
	for _, tc := range []struct {
		frame, want string
		ok          bool
	}{
		{`{"type":"ADDED","object":{"a":{"b":[{"c":1}]}}}`, `{"a":{"b":[{"c":1}]}}`, true},
		{`{"object" :` + "\n" + ` {"a":"}"} ,"type":"DELETED"}`, `{"a":"}"}`, true},
		{`{"type":"BOOKMARK","object":{},"x":[{"y":{}}]}`, `{}`, true},
		{`{"type":"ADDED","x":{},"object":{}}`, "", false}, // two objects
		{`{"type":"ADDED","objects":{}}`, "", false},       // another key
		{`{"type":"ADDED","a\"object":{}}`, "", false},     // a key that ends in it
		{`{"type":"ADDED","object":[{}]}`, "", false},      // not an object
		{`{"type":"ERROR","object":{"code":410}}`, `{"code":410}`, true},
	} {
		f := frameReader{r: strings.NewReader(tc.frame)}
		frame, err := f.next()
		if err != nil {
			t.Fatalf("%s: %v", tc.frame, err)
		}
		got, ok := f.object(frame)
		if ok != tc.ok || got.Raw != tc.want {
			t.Errorf("%s: got %q %v, want %q %v", tc.frame, got.Raw, ok, tc.want, tc.ok)
		}
		if ok && got.Raw != gjson.GetBytes(frame, "object").Raw {
			t.Errorf("%s: got %q, gjson finds %q", tc.frame, got.Raw, gjson.GetBytes(frame, "object").Raw)
		}
	}
}

// FuzzFrameReader: for a stream of two JSON objects that encoding/json accepts, the frame
// reader cuts exactly those two frames.
func FuzzFrameReader(f *testing.F) {
	f.Add(`{"a":"x\\"}`, `{"b":["}",{"c":"\""}]}`)
	f.Add(`{}`, `{"":"\\\\\\"}`)
	f.Add(`{"type":"ADDED","object":{"a":{"b":[{}]}}}`, `{"object" : {"x":"\\"}, "a\\\"object":{}}`)
	f.Add(`{"type":"ADDED","object":{}}`, `{"x":{},"object":{}}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		var want []string
		for _, s := range []string{a, b} {
			var v map[string]any
			if !strings.HasPrefix(strings.TrimSpace(s), "{") || json.Unmarshal([]byte(s), &v) != nil {
				return // not an object (null unmarshals into a map too)
			}
			want = append(want, s)
		}
		stream := want[0] + "\n" + want[1]
		fr := frameReader{r: iotest.HalfReader(strings.NewReader(stream))}
		for i, w := range want {
			got, err := fr.next()
			if err != nil {
				t.Fatalf("frame %d of %q: %v", i, stream, err)
			}
			if !json.Valid(got) || string(bytes.TrimSpace(got)) != strings.TrimSpace(w) {
				t.Fatalf("frame %d of %q: got %q, want %q", i, stream, got, w)
			}
			// The "object" the frame reader finds is the one encoding/json finds.
			obj, ok := fr.object(got)
			if !ok {
				continue
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(got, &fields); err != nil {
				t.Fatalf("frame %d of %q: %v", i, stream, err)
			}
			keys := 0
			gjson.ParseBytes(got).ForEach(func(k, _ gjson.Result) bool {
				if k.String() == "object" {
					keys++
				}
				return true
			})
			if keys == 1 && string(fields["object"]) != obj.Raw {
				t.Fatalf("frame %d of %q: object %q, want %q", i, stream, obj.Raw, fields["object"])
			}
		}
		if _, err := fr.next(); err != io.EOF {
			t.Fatalf("after the frames of %q: %v, want EOF", stream, err)
		}
	})
}

// TestWatchClient: with a client of its own for watches, the VM ListerWatcher lists through
// its client and watches (a watch list too) through the other.
func TestWatchClient(t *testing.T) {
	s := &vmcachetest.APIServer{T: t, Initial: [][]byte{vmcachetest.Rename(t, goldenVMs(t)["create-new"], "vm1", "150")}, RV: "150", Events: make(chan string)}
	watches := httptest.NewServer(s)
	defer watches.Close()
	defer close(s.Events)
	lists := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			t.Errorf("a watch through the list client: %s", r.URL)
		}
		s.ServeHTTP(w, r)
	}))
	defer lists.Close()
	listClient, err := RESTClientFor(&rest.Config{Host: lists.URL})
	if err != nil {
		t.Fatal(err)
	}
	watchClient, err := RESTClientFor(&rest.Config{Host: watches.URL})
	if err != nil {
		t.Fatal(err)
	}
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	lw := &ListerWatcher{Client: listClient, WatchClient: watchClient, GVR: gvr, Namespace: "default", Selector: vmcachetest.Selector}
	l, err := lw.List(metav1.ListOptions{})
	if err != nil || len(l.(*ObjectList).Items) != 1 {
		t.Fatalf("list: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e := <-w.ResultChan(); e.Type != watch.Added || e.Object.(*Object).name != "vm1" {
		t.Errorf("first event %s %v, want vm1 added", e.Type, e.Object)
	}
	if asked, want := s.Asked(), []string{"list", "watchlist"}; !slices.Equal(asked, want) {
		t.Errorf("asked %q, want %q", asked, want)
	}
}

// TestListRefusalKeepsStatus: a list the API server refuses returns its Status as the error,
// the causes kept: the reflector tells a resourceVersion too large by them and lists from the
// latest instead of asking for the same version again.
func TestListRefusalKeepsStatus(t *testing.T) {
	// As the API server answers a list at a version its watch cache has yet to reach.
	status := apierrors.NewTimeoutError("Too large resource version: 200, current: 150", 1)
	status.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	status.ErrStatus.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.ErrStatus.Code))
		if err := json.NewEncoder(w).Encode(status.ErrStatus); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	client, err := RESTClientFor(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	lw := &ListerWatcher{Client: client, GVR: gvr}
	_, err = lw.ListWithContext(t.Context(), metav1.ListOptions{ResourceVersion: "200", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) || !strings.Contains(err.Error(), "Too large resource version: 200") {
		t.Errorf("list: %v, want the API server's Status (a resourceVersion too large)", err)
	}
}
