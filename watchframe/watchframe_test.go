package watchframe

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// lines is a Format of one event a line, "TYPE OBJECT", read through one reused buffer as
// the real formats read: an event type kept from the frame would change under the next one.
// An object "bad" fails to decode, a line without a space fails to split.
type lines struct{ r *bufio.Reader }

func (l *lines) Frame() ([]byte, error) {
	b, err := l.r.ReadSlice('\n')
	if err == io.EOF && len(b) > 0 {
		return nil, io.ErrUnexpectedEOF
	}
	return bytes.TrimSuffix(b, []byte("\n")), err
}

func (l *lines) Split(frame []byte) ([]byte, []byte, error) {
	typ, obj, ok := bytes.Cut(frame, []byte(" "))
	if !ok {
		return nil, nil, errors.New("no space")
	}
	return typ, obj, nil
}

func (l *lines) Object(typ watch.EventType, obj []byte) (runtime.Object, error) {
	if string(obj) == "bad" {
		return nil, errors.New("bad object")
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: string(obj)}}, nil
}

func (l *lines) Status(obj []byte) (*metav1.Status, error) {
	if string(obj) == "bad" {
		return nil, errors.New("bad status")
	}
	return &metav1.Status{Reason: metav1.StatusReason(obj)}, nil
}

// closer records that the stream was closed.
type closer struct{ closed bool }

func (c *closer) Close() error { c.closed = true; return nil }

func decoder(stream string, body io.Closer) *Decoder[[]byte] {
	// The smallest buffer bufio allows: every frame reuses the same bytes.
	return NewDecoder[[]byte](body, &lines{r: bufio.NewReaderSize(strings.NewReader(stream), 16)}, "thing")
}

// TestDecode reads a stream of every type of event to its end. Every event is decoded before
// any is looked at, as the reflector may read one while the decoder is on the next.
func TestDecode(t *testing.T) {
	stream := "ADDED a\nMODIFIED b\nBOOKMARK c\nDELETED d\nERROR Expired\n"
	body := &closer{}
	d := decoder(stream, body)
	var got []watch.Event
	for {
		typ, obj, err := d.Decode()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, watch.Event{Type: typ, Object: obj})
	}
	want := []string{"ADDED a", "MODIFIED b", "BOOKMARK c", "DELETED d", "ERROR Expired"}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i, e := range got {
		var s string
		switch o := e.Object.(type) {
		case *metav1.PartialObjectMetadata:
			s = string(e.Type) + " " + o.Name
		case *metav1.Status:
			s = string(e.Type) + " " + string(o.Reason)
		}
		if s != want[i] {
			t.Errorf("event %d: %q, want %q", i, s, want[i])
		}
	}
	d.Close()
	if !body.closed {
		t.Error("Close did not close the stream")
	}
}

// TestDecodeErrors: each way an event can be wrong ends with an error that names the kind of
// object and the step, and keeps its cause; a stream's own errors come through as they are.
func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, stream, want string
		is                 error
	}{
		{"end between events", "", "EOF", io.EOF},
		{"end inside an event", "ADDED a", "unexpected EOF", io.ErrUnexpectedEOF},
		{"no type", "ADDED\n", "decode thing watch event: no space", nil},
		{"unknown type", "ADDEX a\n", `decode thing watch event: unknown type "ADDEX"`, nil},
		{"a type in the wrong case", "added a\n", `decode thing watch event: unknown type "added"`, nil},
		{"a bad object", "MODIFIED bad\n", "decode thing MODIFIED event: bad object", nil},
		{"a bad status", "ERROR bad\n", "decode thing watch error event: bad status", nil},
	} {
		_, _, err := decoder(tc.stream, &closer{}).Decode()
		if err == nil || err.Error() != tc.want || tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestWatch: the watch delivers the decoded events, and an error that ends decoding as an
// ERROR event of an internal error, as client-go's own REST watch does; then it ends.
func TestWatch(t *testing.T) {
	body := &closer{}
	w := Watch(decoder("ADDED a\nADDEX b\n", body))
	defer w.Stop()
	e := <-w.ResultChan()
	if o, ok := e.Object.(*metav1.PartialObjectMetadata); e.Type != watch.Added || !ok || o.Name != "a" {
		t.Errorf("first event %s %v, want a added", e.Type, e.Object)
	}
	e = <-w.ResultChan()
	st, ok := e.Object.(*metav1.Status)
	if e.Type != watch.Error || !ok || st.Code != http.StatusInternalServerError || st.Reason != metav1.StatusReasonInternalError ||
		!strings.Contains(st.Message, "decode thing watch event: unknown type") {
		t.Errorf("second event %s %+v, want the decoding error", e.Type, e.Object)
	}
	if err := apierrors.FromObject(st); !apierrors.IsInternalError(err) {
		t.Errorf("error %v is not an internal error", err)
	}
	if _, open := <-w.ResultChan(); open {
		t.Error("the watch goes on after a decoding error")
	}
	if !body.closed {
		t.Error("the watch did not close the stream")
	}
}
