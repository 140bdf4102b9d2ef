package webhook

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/convert"
)

// endless is a body of n bytes, a valid review's start followed by padding inside a string,
// made as it is read and counting what was read: a test of the cap never holds the body.
type endless struct {
	prefix []byte
	n, off int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.off >= e.n {
		return 0, io.EOF
	}
	k := int64(len(p))
	k = min(k, e.n-e.off)
	for i := range k {
		if at := e.off + i; at < int64(len(e.prefix)) {
			p[i] = e.prefix[at]
		} else {
			p[i] = 'x'
		}
	}
	e.off += k
	return int(k), nil
}

// reviewOf is a valid review of one VM padded with spaces to exactly n bytes.
func reviewOf(t *testing.T, n int) []byte {
	t.Helper()
	r := []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"cloudnative.czs/v1beta1","objects":[` + vmV1alpha1 + `]}}`)
	if len(r) > n {
		t.Fatalf("a review of %d bytes does not fit in %d", len(r), n)
	}
	return append(r, bytes.Repeat([]byte(" "), n-len(r))...)
}

// TestReviewSizeLimit: a review of exactly the cap is converted; one byte over it is answered
// 413 Request Entity Too Large, having been read no further than the cap and a byte without a
// Content-Length, and not at all with one that announces more; a body many times the cap is
// read no further either. The cap and the bound in flight are the default ones, as the
// webhook serves.
func TestReviewSizeLimit(t *testing.T) {
	conv, err := convert.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	h := Handler{Converter: conv, InFlight: NewInFlight(DefaultMaxReviewBytesInFlight)}
	for name, tc := range sizeCases(DefaultMaxReviewBytes) {
		t.Run(name, func(t *testing.T) { tc.check(t, h) })
	}
}

// sizeCase is a review of size bytes whose request says its length is contentLength (-1:
// nothing, chunked), and what the handler should make of it: the answer's code, and how many
// of its bytes it reads at most.
type sizeCase struct {
	size, contentLength int64
	code                int
	maxRead             int64
}

// sizeCases are reviews about a limit: of exactly the limit, converted; a byte over it,
// answered 413 having been read no further than the limit and a byte, and not at all when its
// length says so; ten times the limit, read no further either.
func sizeCases(limit int64) map[string]sizeCase {
	return map[string]sizeCase{
		"at the limit":                 {size: limit, contentLength: limit, code: http.StatusOK, maxRead: limit},
		"at the limit, chunked":        {size: limit, contentLength: -1, code: http.StatusOK, maxRead: limit},
		"a byte over, announced":       {size: limit + 1, contentLength: limit + 1, code: http.StatusRequestEntityTooLarge, maxRead: 0},
		"a byte over, chunked":         {size: limit + 1, contentLength: -1, code: http.StatusRequestEntityTooLarge, maxRead: limit + 1},
		"ten times the limit, chunked": {size: 10 * limit, contentLength: -1, code: http.StatusRequestEntityTooLarge, maxRead: limit + 1},
	}
}

// check posts the case's review to h (a valid one when it should be converted, else a JSON
// prefix that goes on) and checks the answer and how much of the body h read.
func (tc sizeCase) check(t *testing.T, h http.Handler) {
	t.Helper()
	var body io.Reader = &endless{prefix: []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"`), n: tc.size}
	if tc.code == http.StatusOK {
		body = bytes.NewReader(reviewOf(t, int(tc.size)))
	}
	counted := &countingReader{r: body}
	req := httptest.NewRequest(http.MethodPost, "/convert", counted)
	req.ContentLength = tc.contentLength
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != tc.code {
		t.Errorf("code %d, want %d: %s", rec.Code, tc.code, strings.TrimSpace(rec.Body.String()))
	}
	if counted.n > tc.maxRead {
		t.Errorf("read %d bytes of the body, want at most %d", counted.n, tc.maxRead)
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestUnreadableKeptFieldsLogged: an object whose annotation of kept fields cannot be read is
// converted all the same, the annotation kept, and the webhook logs a warning that names the
// object and the annotation: nothing else would tell that the fields it held are not there.
func TestUnreadableKeptFieldsLogged(t *testing.T) {
	conv, err := convert.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	h := Handler{Converter: conv, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	vm := `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"web","namespace":"default","annotations":{"cloudnative.czs/v1-fields":"{\"spec\":"}},"spec":{"resource":{"cpu":1,"memory":"1Gi","rootDisk":"1G"}}}`
	body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"cloudnative.czs/v1","objects":[` + vm + `]}}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"Success"`) || !strings.Contains(rec.Body.String(), `cloudnative.czs/v1-fields`) {
		t.Fatalf("code %d, body %s", rec.Code, rec.Body)
	}
	want := `level=WARN msg="kept an unreadable annotation" uid=u object="cloudnative.czs/v1alpha1 default/web" to=cloudnative.czs/v1 note="annotation cloudnative.czs/v1-fields is not a JSON object of kept fields (decode the object: unexpected EOF): kept as it is; what it held is not restored"`
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant a line with:\n%s", logs.String(), want)
	}
}

// TestDroppedKeptFieldsLogged: fields in the annotation of kept fields that no conversion keeps
// there (a client wrote them itself) are not restored, and the webhook logs a warning naming
// the object, the annotation and the fields, under a message of its own: the object is
// converted without them, and only the log says why.
func TestDroppedKeptFieldsLogged(t *testing.T) {
	conv, err := convert.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	h := Handler{Converter: conv, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	vm := `{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"web","namespace":"default","annotations":{"cloudnative.czs/v1alpha1-fields":"{\"spec\":{\"image\":\"evil image\"}}"}},"spec":{"runStrategy":"Always","resources":{"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"1G"}}}`
	body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"cloudnative.czs/v1alpha1","objects":[` + vm + `]}}`
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"status":"Success"`) || strings.Contains(rec.Body.String(), `evil`) {
		t.Fatalf("code %d, body %s", rec.Code, rec.Body)
	}
	want := `level=WARN msg="dropped kept fields that no conversion keeps" uid=u object="cloudnative.czs/v1 default/web" to=cloudnative.czs/v1alpha1 note="annotation cloudnative.czs/v1alpha1-fields held spec.image, which no conversion from cloudnative.czs/v1alpha1 to cloudnative.czs/v1 keeps there: dropped, not restored"`
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant a line with:\n%s", logs.String(), want)
	}
}
