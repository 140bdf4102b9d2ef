package vmcache

import (
	"bytes"
	"fmt"
	"io"

	"github.com/tidwall/gjson"
)

// frameReader cuts a stream of JSON objects (a watch stream: one event after another,
// whatever the whitespace between them) into one object at a time.
//
// Why not json.Decoder: it scans each event twice (to find its end, then again to copy it into
// a RawMessage) with encoding/json's general scanner, which was most of the decoder's time.
// Finding the end of an object needs only its braces and strings. Most of an event's bytes
// are inside strings (managedFields above all), so a string is skipped with bytes.IndexByte
// to its closing quote rather than byte by byte.
//
// On the way it notes where each object directly inside the frame starts and ends: a watch
// event has one, its "object", which the decoder then reads without gjson scanning the whole
// event once more to find it (see object).
type frameReader struct {
	r          io.Reader
	buf        []byte
	start, end int // buf[start:end] is read but not yet returned
	// inner is the span, in the last frame returned, of its last object value at depth 1,
	// and inners how many such objects it held.
	inner  [2]int
	inners int
}

// object returns the value of the frame's "object" field as the frame reader found it: the
// frame's only object one level down, behind the key "object". ok is false when the frame
// does not have exactly that shape, and the caller asks gjson instead.
func (f *frameReader) object(frame []byte) (gjson.Result, bool) {
	if f.inners != 1 {
		return gjson.Result{}, false
	}
	from, to := f.inner[0], f.inner[1]
	i := from - 1
	for i >= 0 && isSpace(frame[i]) {
		i--
	}
	if i < 0 || frame[i] != ':' {
		return gjson.Result{}, false
	}
	i--
	for i >= 0 && isSpace(frame[i]) {
		i--
	}
	const key = `"object"`
	if i < len(key) || string(frame[i-len(key)+1:i+1]) != key || frame[i-len(key)] == '\\' {
		return gjson.Result{}, false
	}
	return gjson.Result{Type: gjson.JSON, Raw: unsafeString(frame[from:to])}, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// next returns the next object's bytes, which are valid until the following call.
func (f *frameReader) next() ([]byte, error) {
	depth, inString := 0, false
	i := f.start
	f.inners = 0
	for {
		for i < f.end {
			if inString {
				q := bytes.IndexByte(f.buf[i:f.end], '"')
				if q < 0 {
					i = f.end
					break
				}
				i += q
				// A quote ends the string unless an odd run of backslashes escapes it. The
				// run stops at the string's opening quote at the latest, which is in this
				// frame, so it never reaches before f.start.
				n := 0
				for j := i - 1; f.buf[j] == '\\'; j-- {
					n++
				}
				inString = n%2 == 1
				i++
				continue
			}
			c := f.buf[i]
			i++
			switch c {
			case '"':
				inString = true
			case '{', '[':
				if depth == 1 && c == '{' {
					f.inner[0] = i - 1 - f.start
					f.inners++
				}
				depth++
			case '}', ']':
				depth--
				if depth == 1 && c == '}' {
					f.inner[1] = i - f.start
				}
				if depth == 0 {
					frame := f.buf[f.start:i]
					f.start = i
					return frame, nil
				}
			case ' ', '\t', '\r', '\n':
				if depth == 0 {
					f.start = i // whitespace between objects
				}
			default:
				if depth == 0 {
					return nil, fmt.Errorf("decode event: unexpected %q between objects", c)
				}
			}
		}
		// Keep the part of an object read so far at the front, and make room for more.
		if f.start > 0 {
			n := copy(f.buf, f.buf[f.start:f.end])
			i -= f.start
			f.start, f.end = 0, n
		}
		if f.end == len(f.buf) {
			f.buf = append(f.buf, make([]byte, max(len(f.buf), 32<<10))...)
		}
		n, err := f.r.Read(f.buf[f.end:])
		f.end += n
		if n == 0 && err != nil {
			if err == io.EOF && f.start == f.end {
				return nil, io.EOF
			}
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}
