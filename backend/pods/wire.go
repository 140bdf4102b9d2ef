package pods

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/watchframe"
)

// The pod informer watches over the REST client and reads each protobuf watch event in place.
//
// Why not client-go's typed watch: its decoder copies each event's pod twice before decoding
// it (into the WatchEvent's RawExtension, then into the envelope's runtime.Unknown), makes the
// pod by reflection through the scheme, and decodes its managedFields, which nothing here
// reads. In a cold start over many VMs the two copies and the managedFields were about a third
// of what the controller allocated before its caches synced, and the garbage collector's work
// with them; the pod itself is still allocated, without reflection. Here the
// frame is read into one buffer reused from event to event, the envelope is walked with
// protowire, and the pod is decoded from the buffer with its generated Unmarshal (which copies
// what it keeps), managedFields left out but for the three things read of them: whether
// someone other than the controller owns the pod's tolerations (tolerationsChanged) or the
// server container's image (imageChanged), for which each entry is read in place, and decoded
// only when it is another manager's that may own them, and whether a resize changed the
// server container's resources since the pod was made (resizedSince), kept as one shared
// entry (resizeMarker), not the resize's own. The decoder's skeleton, shared with the VM
// informer's, is watchframe's; this file holds the protobuf part of it (podFormat).

// watchStreamType is what the pod watch asks for: a stream of length-prefixed protobuf frames.
const watchStreamType = "application/vnd.kubernetes.protobuf;stream=watch"

// maxFrame bounds one watch event, as client-go's streaming decoder does.
const maxFrame = 16 << 20

// protobufMagic starts every object the API server encodes in protobuf (the envelope,
// runtime.Unknown, follows it).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// Field numbers of the messages the decoder walks (k8s.io/apimachinery's generated.proto).
const (
	watchEventType, watchEventObject = 1, 2 // metav1.WatchEvent
	rawExtensionRaw                  = 1    // runtime.RawExtension
	unknownRaw, unknownEncoding      = 2, 3 // runtime.Unknown
	podMetadata                      = 1    // corev1.Pod
	objectMetaManagedFields          = 17   // metav1.ObjectMeta
	managedFieldsManager             = 1    // metav1.ManagedFieldsEntry
	managedFieldsFieldsV1            = 7
	managedFieldsSubresource         = 8
	fieldsV1Raw                      = 1 // metav1.FieldsV1
)

// podListerWatcher lists pods with the typed clientset and watches them over rest.
type podListerWatcher struct {
	client    kubernetes.Interface
	rest      rest.Interface
	namespace string
	selector  string
}

var (
	_ cache.ListerWatcher            = (*podListerWatcher)(nil)
	_ cache.ListerWatcherWithContext = (*podListerWatcher)(nil)
)

// ListWithContext lists the pods with the typed clientset (a watch list, the default, sends
// them as watch events instead).
func (lw *podListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	opts.LabelSelector = lw.selector
	l, err := lw.client.CoreV1().Pods(lw.namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	return l, nil
}

// WatchWithContext watches the pods; each event's object is a *corev1.Pod without its
// managedFields but those that tolerationsChanged or imageChanged may read true and, for a
// pod resized since it was made, resizeMarker (a *metav1.Status for an error event).
func (lw *podListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.LabelSelector = lw.selector
	opts.Watch = true
	body, err := lw.rest.Get().Namespace(lw.namespace).Resource("pods").
		VersionedParams(&opts, scheme.ParameterCodec).SetHeader("Accept", watchStreamType).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	return watchframe.Watch(newPodWatchDecoder(body)), nil
}

// List is ListWithContext without a context, for client-go's older interface.
func (lw *podListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch is WatchWithContext without a context, for client-go's older interface.
func (lw *podListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// newPodWatchDecoder reads a protobuf watch stream of pods, one event at a time.
func newPodWatchDecoder(body io.ReadCloser) *watchframe.Decoder[[]byte] {
	return watchframe.NewDecoder[[]byte](body, &podFormat{body: body}, "pod")
}

// podFormat is the protobuf encoding of pod watch events (watchframe.Format): length-prefixed
// frames, each a metav1.WatchEvent whose object is a pod in the protobuf envelope. An event's
// object is held as its bytes in the frame.
type podFormat struct {
	body io.Reader
	buf  []byte // the current frame; reused, so nothing kept may point into it
}

// Frame reads the next length-prefixed frame into f.buf. A stream that ends between frames
// ends with io.EOF; one cut inside a frame, with io.ErrUnexpectedEOF.
func (f *podFormat) Frame() ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(f.body, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, fmt.Errorf("decode pod watch event: a frame of %d bytes is over the limit of %d (is the stream protobuf?)", size, maxFrame)
	}
	if cap(f.buf) < int(size) {
		f.buf = make([]byte, size)
	}
	f.buf = f.buf[:size]
	if _, err := io.ReadFull(f.body, f.buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return f.buf, nil
}

// Split reads a metav1.WatchEvent: its type, and its object's bytes out of the protobuf
// envelope (runtime.Unknown), in place.
func (f *podFormat) Split(frame []byte) (typ, raw []byte, err error) {
	var object []byte
	err = fields(frame, func(num protowire.Number, v []byte) error {
		switch num {
		case watchEventType:
			typ = v
		case watchEventObject:
			return fields(v, func(num protowire.Number, v []byte) error {
				if num == rawExtensionRaw {
					object = v
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	raw, err = unwrap(object)
	return typ, raw, err
}

// Object decodes a pod, without its managedFields (unmarshalPod).
func (f *podFormat) Object(_ watch.EventType, raw []byte) (runtime.Object, error) {
	pod := &corev1.Pod{}
	if err := unmarshalPod(raw, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// Status decodes the Status of an error event.
func (f *podFormat) Status(raw []byte) (*metav1.Status, error) {
	st := &metav1.Status{}
	if err := st.Unmarshal(raw); err != nil {
		return nil, err
	}
	return st, nil
}

// unwrap returns the object's own bytes from the protobuf envelope: the magic, then a
// runtime.Unknown whose raw field holds them.
func unwrap(b []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(b, protobufMagic)
	if !ok {
		return nil, errors.New("the object is not in the protobuf envelope")
	}
	var raw []byte
	err := fields(rest, func(num protowire.Number, v []byte) error {
		switch num {
		case unknownRaw:
			raw = v
		case unknownEncoding:
			if len(v) > 0 {
				return fmt.Errorf("content encoding %q is not supported", v)
			}
		}
		return nil
	})
	return raw, err
}

// unmarshalPod decodes a pod's protobuf into pod, without its managedFields but an entry of
// another manager than the controller's that owns the pod's tolerations or a container's
// image (otherOwner), which tolerationsChanged and imageChanged read as they read the whole
// list, and, for a pod resized since it was made, resizeMarker in place of the resize's
// entries, which is all resizedSince asks of them.
//
// The generated Unmarshal of a message merges into what is there already, as protobuf
// decoding does, so a message may be decoded a run of fields at a time: every run of the
// pod's fields but its metadata, and every run of its metadata's fields but managedFields.
func unmarshalPod(b []byte, pod *corev1.Pod) error {
	return runs(b, podMetadata, pod.Unmarshal, func(meta []byte) error {
		resized := false
		return runs(meta, objectMetaManagedFields, pod.ObjectMeta.Unmarshal, func(entry []byte) error {
			switch keep := otherOwner(entry); {
			case keep == keepResize && !resized:
				resized = true
				pod.ManagedFields = append(pod.ManagedFields, resizeMarker)
				return nil
			case keep != keepEntry:
				return nil
			}
			var e metav1.ManagedFieldsEntry
			if err := e.Unmarshal(entry); err != nil {
				return fmt.Errorf("managedFields: %w", err)
			}
			pod.ManagedFields = append(pod.ManagedFields, e)
			return nil
		})
	})
}

// What unmarshalPod keeps of a managedFields entry (otherOwner).
const (
	keepNone   = iota
	keepEntry  // the entry itself
	keepResize // resizeMarker, once for the pod
)

// otherOwner tells what unmarshalPod keeps of entry, a managedFields entry's bytes. The entry
// itself when it may be one of another manager than the controller's that owns the pod's
// tolerations or the server container's image: its manager is not fieldManager, it is not a
// subresource's (the status's or the resize's: spec.tolerations and the images are changed
// only through the pod itself), and its fields name the tolerations or an image (a plain
// search, done only for the entries the first two let through, which are few and small).
// resizeMarker when it is the resize subresource's and owns the server container's resources
// (resizedSince; its fields are decoded only when they name resources). Read in place,
// without an allocation; an entry whose fields do not parse, which the API server never
// sends, is left out, as it was when managedFields were skipped whole. tolerationsChanged and
// imageChanged have the last word, on the entry decoded.
func otherOwner(entry []byte) int {
	var manager, subresource, fieldsV1 []byte
	if fields(entry, func(num protowire.Number, v []byte) error {
		switch num {
		case managedFieldsManager:
			manager = v
		case managedFieldsSubresource:
			subresource = v
		case managedFieldsFieldsV1:
			fieldsV1 = v
		}
		return nil
	}) != nil {
		return keepNone
	}
	switch {
	case string(subresource) == resizeSubresource:
		if raw := rawFields(fieldsV1); bytes.Contains(raw, fieldResources) && ownsServerResources(raw) {
			return keepResize
		}
	case len(subresource) == 0 && string(manager) != fieldManager &&
		(bytes.Contains(fieldsV1, fieldTolerations) || bytes.Contains(fieldsV1, fieldImage)):
		return keepEntry
	}
	return keepNone
}

// rawFields is the JSON of a metav1.FieldsV1's bytes (its field raw), read in place; nil
// when they do not parse.
func rawFields(fieldsV1 []byte) []byte {
	var raw []byte
	if fields(fieldsV1, func(num protowire.Number, v []byte) error {
		if num == fieldsV1Raw {
			raw = v
		}
		return nil
	}) != nil {
		return nil
	}
	return raw
}

// runs walks the fields of message b and passes each run of consecutive fields other than
// num to rest, and each field num's bytes to one.
func runs(b []byte, num protowire.Number, rest, one func([]byte) error) error {
	start := 0 // of the run not yet passed on
	for i := 0; i < len(b); {
		n, typ, tagLen := protowire.ConsumeTag(b[i:])
		if tagLen < 0 {
			return fmt.Errorf("field at byte %d: %w", i, protowire.ParseError(tagLen))
		}
		valLen := protowire.ConsumeFieldValue(n, typ, b[i+tagLen:])
		if valLen < 0 {
			return fmt.Errorf("field %d at byte %d: %w", n, i, protowire.ParseError(valLen))
		}
		end := i + tagLen + valLen
		if n == num && typ == protowire.BytesType {
			if start < i {
				if err := rest(b[start:i]); err != nil {
					return err
				}
			}
			v, _ := protowire.ConsumeBytes(b[i+tagLen : end])
			if err := one(v); err != nil {
				return err
			}
			start = end
		}
		i = end
	}
	if start < len(b) {
		return rest(b[start:])
	}
	return nil
}

// fields calls f with the number and bytes of each length-delimited field of message b, and
// skips the others.
func fields(b []byte, f func(num protowire.Number, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if err := f(num, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
