package vmcache

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/schema"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// The watch decoder and Answer read their bytes in place (a frame buffer reused from event to
// event, a write's answer); what they keep must be copied out. These tests change the bytes
// after the fact and read everything kept: a kept string that points into them reads the new
// bytes. (Leaving out the copy of one, the name's, makes the first fail.)

// aliasEvent is a watch event whose every kept value is c six times over, so that an event
// read over an earlier one's bytes shows in any value that points into them.
func aliasEvent(c byte) string {
	s := strings.Repeat(string(c), 6)
	return fmt.Sprintf(`{"type":"ADDED","object":{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"n%s","namespace":"ns%s","uid":"u%s","resourceVersion":"r%s","generation":1,"annotations":{"%s":"t%s"}},"spec":{},"status":{"phase":"P%s","reason":"R%s"}}}`,
		s, s, s, s, schema.AnnotationRestartedAt, s, s, s)
}

// TestWatchObjectsOutliveTheirFrame: every value of an event's Object reads the same after
// the next events were read into the same buffer: whole, a byte at a time, and an event a
// read, which has each event overwrite the last in place.
func TestWatchObjectsOutliveTheirFrame(t *testing.T) {
	f := decidecase.Fields(t)
	events := []string{aliasEvent('a'), aliasEvent('b'), aliasEvent('c')}
	stream := strings.Join(events, "")
	for name, r := range map[string]io.Reader{
		"whole":           strings.NewReader(stream),
		"a byte a read":   iotest.OneByteReader(strings.NewReader(stream)),
		"an event a read": &eventPerRead{events: events},
	} {
		d := newWatchDecoder(io.NopCloser(r), f)
		var objs []*Object
		for {
			_, o, err := d.Decode()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			objs = append(objs, o.(*Object))
		}
		if len(objs) != len(events) {
			t.Fatalf("%s: %d objects, want %d", name, len(objs), len(events))
		}
		for i, o := range objs {
			s := strings.Repeat(string(rune('a'+i)), 6)
			vm, err := o.View(f)
			if err != nil {
				t.Fatal(err)
			}
			st := vm.Status()
			if o.GetName() != "n"+s || o.GetNamespace() != "ns"+s || string(o.GetUID()) != "u"+s || o.GetResourceVersion() != "r"+s ||
				string(o.Phase()) != "P"+s || o.Reason() != "R"+s || st.Reason != "R"+s || vm.RestartRequested() != "t"+s {
				t.Errorf("%s, event %d: %q %q %q %q %q %q %q %q", name, i, o.GetName(), o.GetNamespace(), o.GetUID(), o.GetResourceVersion(), o.Phase(), o.Reason(), st.Reason, vm.RestartRequested())
			}
		}
	}
}

// TestAnswerOutlivesTheBody: Answer's compact form and resourceVersion, and a view of them,
// read the same after the answer's body is overwritten.
func TestAnswerOutlivesTheBody(t *testing.T) {
	for name, body := range goldenVMs(t) {
		raw, rv, err := Answer(body)
		if err != nil {
			t.Fatal(err)
		}
		rawCopy, rvCopy := bytes.Clone(raw), strings.Clone(rv)
		vm := schema.ViewOf(raw, rv, decidecase.Fields(t))
		st := vm.Status()
		reason, vmName := strings.Clone(st.Reason), strings.Clone(vm.Name())
		for i := range body {
			body[i] = 'x'
		}
		if !bytes.Equal(raw, rawCopy) || rv != rvCopy || st.Reason != reason || vm.Name() != vmName {
			t.Errorf("%s: Answer's result changed with the body", name)
		}
	}
}

// eventPerRead hands out one event per Read, at most.
type eventPerRead struct{ events []string }

func (r *eventPerRead) Read(b []byte) (int, error) {
	if len(r.events) == 0 {
		return 0, io.EOF
	}
	n := copy(b, r.events[0])
	r.events[0] = r.events[0][n:]
	if r.events[0] == "" {
		r.events = r.events[1:]
	}
	return n, nil
}
