package pods

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
)

// wirePod is a server pod with what the API server adds: managedFields, labels, annotations,
// an owner, and the status a kubelet writes.
func wirePod() *corev1.Pod {
	p := benchPod()
	p.Labels["extra"] = "x"
	p.Annotations = map[string]string{AnnotationVM: "vm-00042", "note": "a \"quoted\" value"}
	p.Finalizers = []string{"example.com/keep"}
	p.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "vm-controller", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}},
		{Manager: "kwok", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}},
	}
	return p
}

// watchStream encodes events as the API server sends a protobuf watch: each a
// metav1.WatchEvent, length-prefixed, whose object is in the protobuf envelope.
func watchStream(t testing.TB, events ...watch.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	raw := protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)
	embedded := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion)
	enc := restwatch.NewEncoder(streaming.NewEncoder(protobuf.LengthDelimitedFramer.NewFrameWriter(&buf), raw), embedded)
	for _, e := range events {
		if err := enc.Encode(&e); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// clientGoEvents decodes a protobuf watch stream as client-go's typed watch does (its typed
// clients' decoder leaves each object's kind unset, as WithoutVersionDecoder does).
func clientGoEvents(t *testing.T, stream []byte) []watch.Event {
	t.Helper()
	d := restwatch.NewDecoder(streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(io.NopCloser(bytes.NewReader(stream))),
		protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)), runtime.WithoutVersionDecoder{Decoder: scheme.Codecs.UniversalDeserializer()})
	var out []watch.Event
	for {
		typ, obj, err := d.Decode()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, watch.Event{Type: typ, Object: obj})
	}
}

// TestPodWatchDecoder: each event reads as client-go's own decoder reads it, but for
// managedFields, which are left out; read whole and one byte at a time, with every event
// decoded before any is compared (nothing may point into the decoder's reused buffer).
func TestPodWatchDecoder(t *testing.T) {
	pod := wirePod()
	modified := pod.DeepCopy()
	modified.ResourceVersion, modified.Status.Phase = "123457", corev1.PodFailed
	bookmark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "200",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	gone := &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: http.StatusGone, Message: "too old"}
	stream := watchStream(t,
		watch.Event{Type: watch.Added, Object: pod},
		watch.Event{Type: watch.Modified, Object: modified},
		watch.Event{Type: watch.Bookmark, Object: bookmark},
		watch.Event{Type: watch.Deleted, Object: modified},
		watch.Event{Type: watch.Error, Object: gone},
	)
	want := clientGoEvents(t, stream)
	if len(want) != 5 {
		t.Fatalf("client-go read %d events, want 5", len(want))
	}
	for _, e := range want {
		if p, ok := e.Object.(*corev1.Pod); ok {
			if e.Type != watch.Bookmark && len(p.ManagedFields) == 0 {
				t.Fatalf("the stream lost the pod's managedFields, so the test would not see them left out")
			}
			p.ManagedFields = nil
		}
	}
	for _, oneByte := range []bool{false, true} {
		var r io.Reader = bytes.NewReader(stream)
		if oneByte {
			r = &oneByteReader{r}
		}
		d := newPodWatchDecoder(io.NopCloser(r))
		var got []watch.Event
		for {
			typ, obj, err := d.Decode()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("one byte at a time %v: %v", oneByte, err)
			}
			got = append(got, watch.Event{Type: typ, Object: obj})
		}
		if len(got) != len(want) {
			t.Fatalf("one byte at a time %v: %d events, want %d", oneByte, len(got), len(want))
		}
		for i := range want {
			if got[i].Type != want[i].Type || !apiequality.Semantic.DeepEqual(got[i].Object, want[i].Object) {
				t.Errorf("one byte at a time %v, event %d:\n got %s %+v\nwant %s %+v", oneByte, i, got[i].Type, got[i].Object, want[i].Type, want[i].Object)
			}
		}
	}
}

// TestUnmarshalPodInRuns: fields in any order, the skipped ones between others, decode as the
// generated Unmarshal decodes the whole pod, managedFields aside. The API server writes
// fields in order (metadata first, managedFields last in it), so a run is never split there;
// another encoder may, and the merge of runs must still hold.
func TestUnmarshalPodInRuns(t *testing.T) {
	pod := wirePod()
	b, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// Each field of m as its own record, in order.
	records := func(m []byte) [][]byte {
		var out [][]byte
		for len(m) > 0 {
			num, typ, n := protowire.ConsumeTag(m)
			l := protowire.ConsumeFieldValue(num, typ, m[n:])
			if n < 0 || l < 0 {
				t.Fatalf("bad record at %d", len(m))
			}
			out = append(out, m[:n+l])
			m = m[n+l:]
		}
		return out
	}
	var meta []byte
	var others [][]byte
	for _, r := range records(b) {
		num, _, n := protowire.ConsumeTag(r)
		if num != podMetadata {
			others = append(others, r)
			continue
		}
		v, _ := protowire.ConsumeBytes(r[n:])
		meta = v
	}
	// Metadata with its managedFields first and between the other fields, reversed.
	var managed, rest [][]byte
	for _, r := range records(meta) {
		if num, _, _ := protowire.ConsumeTag(r); num == objectMetaManagedFields {
			managed = append(managed, r)
		} else {
			rest = append(rest, r)
		}
	}
	if len(managed) == 0 || len(rest) < 3 || len(others) < 2 {
		t.Fatalf("the pod has too few fields to reorder: %d managed, %d metadata, %d others", len(managed), len(rest), len(others))
	}
	var m2 []byte
	m2 = append(m2, managed[0]...)
	for i := len(rest) - 1; i >= 0; i-- {
		m2 = append(m2, rest[i]...)
		if i == len(rest)/2 {
			for _, r := range managed[1:] {
				m2 = append(m2, r...)
			}
		}
	}
	// The pod: status, metadata, spec.
	var b2 []byte
	b2 = append(b2, others[len(others)-1]...)
	b2 = protowire.AppendTag(b2, podMetadata, protowire.BytesType)
	b2 = protowire.AppendBytes(b2, m2)
	for _, r := range others[:len(others)-1] {
		b2 = append(b2, r...)
	}
	want := &corev1.Pod{}
	if err := want.Unmarshal(b2); err != nil {
		t.Fatal(err)
	}
	want.ManagedFields = nil
	got := &corev1.Pod{}
	if err := unmarshalPod(b2, got); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got, want) || len(got.Labels) != len(pod.Labels) || len(got.Annotations) != len(pod.Annotations) {
		t.Errorf("reordered pod:\n got %+v\nwant %+v", got, want)
	}
}

// oneByteReader reads one byte at a time, as a slow connection may deliver a frame.
type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// TestPodWatchDecoderErrors: a stream cut inside a frame, a JSON stream and a frame that is
// not a watch event each end with an error that says so, never a panic or a silent end.
func TestPodWatchDecoderErrors(t *testing.T) {
	stream := watchStream(t, watch.Event{Type: watch.Added, Object: wirePod()})
	frame := stream[4:]
	for _, tc := range []struct {
		name   string
		stream []byte
		want   string
	}{
		{"cut inside a frame", stream[:len(stream)-10], "unexpected EOF"},
		{"cut inside the length", stream[:2], "unexpected EOF"},
		{"a JSON stream", []byte(`{"type":"ADDED","object":{}}` + "\n"), "is the stream protobuf?"},
		{"an object outside the envelope", frameOf(bytes.Replace(frame, protobufMagic, []byte("k9s\x00"), 1)), "not in the protobuf envelope"},
		{"an unknown event type", frameOf(bytes.Replace(frame, []byte("ADDED"), []byte("ADDEX"), 1)), `unknown type "ADDEX"`},
		{"a truncated message", frameOf(frame[:len(frame)/2]), "decode pod watch event"},
	} {
		d := newPodWatchDecoder(io.NopCloser(bytes.NewReader(tc.stream)))
		_, _, err := d.Decode()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// frameOf puts b in a frame of its own.
func frameOf(b []byte) []byte {
	return append([]byte{byte(len(b) >> 24), byte(len(b) >> 16), byte(len(b) >> 8), byte(len(b))}, b...)
}

// FuzzPodWatchDecoder: whatever the bytes, decoding ends in events or an error, never a panic.
func FuzzPodWatchDecoder(f *testing.F) {
	f.Add(watchStream(f, watch.Event{Type: watch.Added, Object: wirePod()}))
	f.Add([]byte{0, 0, 0, 4, 0x0a, 0x02, 'h', 'i'})
	f.Fuzz(func(t *testing.T, stream []byte) {
		d := newPodWatchDecoder(io.NopCloser(bytes.NewReader(stream)))
		for range 100 {
			if _, _, err := d.Decode(); err != nil {
				return
			}
		}
	})
}

// TestPodListerWatcher: the watch asks the API server for the VMs' pods as a protobuf
// stream, and its events come through as pods.
func TestPodListerWatcher(t *testing.T) {
	stream := watchStream(t, watch.Event{Type: watch.Added, Object: wirePod()})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/api/v1/namespaces/ns/pods" || q.Get("watch") != "true" || q.Get("labelSelector") != LabelVMUID ||
			q.Get("resourceVersion") != "7" || r.Header.Get("Accept") != watchStreamType {
			t.Errorf("asked for %s with Accept %q", r.URL, r.Header.Get("Accept"))
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", watchStreamType)
		_, _ = w.Write(stream)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeProtobuf}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lw := &podListerWatcher{client: client, rest: client.CoreV1().RESTClient(), namespace: "ns", selector: LabelVMUID}
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e := <-w.ResultChan()
	p, ok := e.Object.(*corev1.Pod)
	if e.Type != watch.Added || !ok || p.Name != wirePod().Name || p.ManagedFields != nil || p.Spec.NodeName != "kwok-node-17" {
		t.Errorf("event %s %+v", e.Type, e.Object)
	}
}

// BenchmarkPodWatchEvent is what one pod watch event costs, from its frame on the wire to the
// cached form: client-go's typed watch decoder, and the pod informer's (wire.go).
func BenchmarkPodWatchEvent(b *testing.B) {
	stream := watchStream(b, watch.Event{Type: watch.Modified, Object: wirePod()})
	r := bytes.NewReader(nil)
	b.Run("client-go", func(b *testing.B) {
		b.ReportAllocs()
		d := restwatch.NewDecoder(streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(io.NopCloser(r)),
			protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)), runtime.WithoutVersionDecoder{Decoder: scheme.Codecs.UniversalDeserializer()})
		for b.Loop() {
			r.Reset(stream)
			_, obj, err := d.Decode()
			if err != nil {
				b.Fatal(err)
			}
			cachePod(obj.(*corev1.Pod))
		}
	})
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		d := newPodWatchDecoder(io.NopCloser(r))
		for b.Loop() {
			r.Reset(stream)
			_, obj, err := d.Decode()
			if err != nil {
				b.Fatal(err)
			}
			cachePod(obj.(*corev1.Pod))
		}
	})
}
