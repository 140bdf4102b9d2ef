package watchframe

import (
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Format is one encoding of watch events: the part of a decoder that differs between them. O
// is how the encoding holds an event's object from Split to its decoding.
type Format[O any] interface {
	// Frame reads the next event's bytes, valid until the next call. A stream that ends
	// between events ends with io.EOF; one cut inside an event, with io.ErrUnexpectedEOF.
	Frame() ([]byte, error)
	// Split finds an event's type, as sent, and its object in frame; both may point into it.
	Split(frame []byte) (typ []byte, obj O, err error)
	// Object decodes the object of an ADDED, MODIFIED, DELETED or BOOKMARK event into what the
	// informer keeps. It copies what it keeps: the frame's bytes are reused.
	Object(typ watch.EventType, obj O) (runtime.Object, error)
	// Status decodes the object of an ERROR event.
	Status(obj O) (*metav1.Status, error)
}

// Decoder reads a watch stream in a Format, one event at a time: a watch.Decoder.
type Decoder[O any] struct {
	body   io.Closer
	format Format[O]
	what   string // the kind of object, in errors
}

// NewDecoder reads the events of body in format f; what names the kind of object watched
// ("VM", "pod") in errors. Close closes body.
func NewDecoder[O any](body io.Closer, f Format[O], what string) *Decoder[O] {
	return &Decoder[O]{body: body, format: f, what: what}
}

var _ watch.Decoder = (*Decoder[[]byte])(nil)

// Decode reads the next event. io.EOF ends the stream.
func (d *Decoder[O]) Decode() (watch.EventType, runtime.Object, error) {
	frame, err := d.format.Frame()
	if err != nil {
		return "", nil, err
	}
	t, obj, err := d.format.Split(frame)
	if err != nil {
		return "", nil, fmt.Errorf("decode %s watch event: %w", d.what, err)
	}
	typ, ok := eventType(t)
	if !ok {
		return "", nil, fmt.Errorf("decode %s watch event: unknown type %q", d.what, t)
	}
	if typ == watch.Error {
		st, err := d.format.Status(obj)
		if err != nil {
			return "", nil, fmt.Errorf("decode %s watch error event: %w", d.what, err)
		}
		return typ, st, nil
	}
	o, err := d.format.Object(typ, obj)
	if err != nil {
		return "", nil, fmt.Errorf("decode %s %s event: %w", d.what, typ, err)
	}
	return typ, o, nil
}

// Close closes the stream.
func (d *Decoder[O]) Close() { _ = d.body.Close() }

// eventType is the client-go constant for the type t names; t is only compared, not kept.
func eventType(t []byte) (watch.EventType, bool) {
	switch string(t) { // compared only, so not copied
	case string(watch.Added):
		return watch.Added, true
	case string(watch.Modified):
		return watch.Modified, true
	case string(watch.Deleted):
		return watch.Deleted, true
	case string(watch.Bookmark):
		return watch.Bookmark, true
	case string(watch.Error):
		return watch.Error, true
	}
	return "", false
}

// Watch is the watch of the events d reads, as client-go's REST client makes one: an error
// that ends decoding reaches the reflector as an ERROR event of an internal error.
func Watch(d watch.Decoder) watch.Interface {
	return watch.NewStreamWatcher(d, apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding"))
}
