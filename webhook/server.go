package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/convert"
)

// DefaultMaxReviewBytes bounds the body of a ConversionReview (Handler.MaxBytes,
// --max-review-bytes).
//
// What the API server sends is the objects of one read that are not in the version asked for,
// in one review (getObjectsToConvert in k8s.io/apiextensions-apiserver
// pkg/apiserver/conversion/webhook_converter.go): one object for a get, a write or a watch
// event, at most the API server's request body limit of 3 MiB (MaxRequestBodyBytes in
// k8s.io/apiserver pkg/server/config.go; etcd keeps 1.5 MiB at most). With its watch cache on,
// each version's cache holds its objects converted one by one as they are written, and lists
// are served from it with no review (measured on Kubernetes 1.36: docs/deploying.md); a list
// the cache does not serve (the cache off, or not ready) sends every item of the page, as many
// as the client's limit (kubectl asks for 500), or every object without one. So unlike an admission review, which holds
// two objects and which controller-runtime caps at 7 MiB (2 x 3 MiB, and 1 MiB for the rest:
// maxRequestSize in sigs.k8s.io/controller-runtime pkg/webhook/admission/http.go; its
// conversion webhook reads without a cap), a conversion review has no size the API server
// never exceeds. The default holds a page of 500 VMs many times over and an unpaginated list
// of about thirteen thousand (a VM is about 1.2 KB with its managed fields). What the handler
// holds for it (the body, the decoded review, the converted objects and the answer) is about
// four times the body, so that one such review, with the garbage collector's headroom, fits
// in the memory limit of the webhook's Deployment (256Mi) but not twice over:
// DefaultMaxReviewBytesInFlight bounds how many are handled at once. A larger cluster whose
// clients list a converted version without pages raises it, and the bound in flight and the
// memory limit with it.
const DefaultMaxReviewBytes = 16 << 20

// MaxReviewBytesCeiling is the largest Handler.MaxBytes the webhook command takes
// (--max-review-bytes): 1 GiB.
//
// It is not the API server's request limit. An admission review holds at most an object and
// its old self, so the 3 MiB the API server takes of a body (MaxRequestBodyBytes, its
// --max-request-bytes; etcd keeps 1.5 MiB of an object) bound it; a conversion review of a
// list holds every item the read returns (DefaultMaxReviewBytes), so nothing the API server
// enforces bounds it. What bounds it is what it can mean: a review takes about four times its
// body in the webhook's memory, 4 GiB at this ceiling, sixteen times the Deployment's limit;
// and no list holds more than etcd keeps of the resource, which etcd's default quota bounds at
// 2 GiB for the whole cluster (--quota-backend-bytes; 8 GiB is its suggested most). 1 GiB is
// about 900,000 VMs of 1.2 KB in one list read without pages, and 64 times the default. A
// larger value is a slip (a size in the wrong unit), which would let one review take the
// process past any memory limit it has.
const MaxReviewBytesCeiling = 1 << 30

// DefaultMaxReviewBytesInFlight bounds the bytes of the reviews the webhook handles at once
// (Handler.InFlight, --max-review-bytes-in-flight): two reviews of DefaultMaxReviewBytes, or
// one and smaller ones up to the rest.
//
// The cap on one review does not bound the process, as the API server sends reviews
// concurrently. Nor does this bound alone: the collector lets the heap grow to twice what was
// live at its last cycle (GOGC=100), which in a stream of reviews is measured while the one
// before is at its peak, so a few reviews in a row can take the process past the Deployment's
// memory limit of 256Mi. GOMEMLIMIT alone is not enough either: once what is live exceeds it,
// the collector cannot help, and reviews at once with no bound make that much live.
//
// So the Deployment sets GOMEMLIMIT=200MiB (the 256Mi limit less the binary's mapped pages and
// a margin), which makes the collector work harder near it rather than let the heap grow past
// it, and this bound keeps what is live well under that: a few MiB idle and about four times
// the 32 MiB in flight. A Deployment of one's own sets GOMEMLIMIT likewise, or a lower
// --max-review-bytes-in-flight. The measurements behind each of these (each bound alone, both,
// one and many reviews at once) are in docs/dev/benchmarks.md, "The conversion webhook's
// memory".
const DefaultMaxReviewBytesInFlight = 32 << 20

// DefaultMaxReviewWait bounds how long a review waits for its turn (Handler.MaxWait) before it
// is answered 503 with a Retry-After, which the API server's client obeys (client-go retries
// a 503 that has one, up to ten times, within the request's own deadline).
//
// The request's context does not bound the wait by itself: the API server calls a webhook
// over HTTP/1.1 (NextProtos in k8s.io/apiserver pkg/util/webhook/client.go), and net/http's
// HTTP/1 server notices that the client went only once the handler has read the body, so a
// review the API server gave up on would otherwise keep its place and, once let in, be read
// and converted for no one. Thirty seconds is many maximum-size conversions (one takes about
// a second on two cores, two to three with others at once) and half the API server's request
// timeout (60s by default), which also ends the wait of a list for its conversion.
const DefaultMaxReviewWait = 30 * time.Second

// DefaultReviewBodyTimeout bounds how long a review's body may take to arrive once the review
// has its turn in InFlight (Handler.BodyTimeout, --review-body-timeout).
//
// A request takes its share of InFlight before it reads a byte of its body, so without a bound
// a client that says Content-Length: 16 MiB and then sends nothing holds that share for as long
// as it keeps the connection open: two such requests hold the default bound, every real review
// then waits DefaultMaxReviewWait and is answered 503, and every read of the VMs in a version
// other than the stored one fails. The API server sends a review at once: it encodes the whole
// review before the call (the rest client's Body) and writes it right after the headers, so a
// real body arrives as fast as the network carries it, 16 MiB in well under a second within a
// cluster. Ten seconds is enough for DefaultMaxReviewBytes at 1.6 MB/s, and for the largest
// review the command takes (MaxReviewBytesCeiling) at about 100 MB/s. It is a third of
// DefaultMaxReviewWait: bytes given back go to the requests that wait for them first, so a
// review queued behind stalled bodies is let in when they time out, with two thirds of its
// wait left, and well within the API server's request timeout (60s by default), past which
// the client whose read needed the review gets an error whatever the webhook answers (the
// call itself has no deadline: context.TODO in webhook_converter.go). A client that stalls
// again and again delays reviews by this bound, no longer.
//
// It bounds the answer's writing the same way, from the end of the conversion: a client that
// sends its review and never reads the answer would otherwise hold the review's share until it
// closed the connection, as the handler would stay in Write. The answer is about as large as
// the review and the API server reads it at once, so the same time is enough for it. A client
// that does both, a body that arrives just within the bound and an answer never read, holds
// its share for twice this bound and the conversion: 20 s and about a second with the
// defaults, still within DefaultMaxReviewWait.
const DefaultReviewBodyTimeout = 10 * time.Second

// Handler answers ConversionReviews posted to it.
type Handler struct {
	Converter *convert.Converter
	Log       *slog.Logger
	// MaxBytes bounds a review's body: a longer one is answered 413 Request Entity Too
	// Large, having been read no further than the bound. Zero: DefaultMaxReviewBytes. Above
	// InFlight's total it is lowered to that, which a review could never wait its way past.
	MaxBytes int64
	// InFlight, shared by every request, bounds the bytes of the bodies being handled at
	// once; a request takes its Content-Length, or MaxBytes when it has none, before reading
	// a byte. Nil: no bound (the webhook command always sets one).
	InFlight *InFlight
	// MaxWait bounds a request's wait for InFlight, as its context does: 503 after it.
	// Zero: DefaultMaxReviewWait.
	MaxWait time.Duration
	// BodyTimeout bounds how long the body may take to arrive once the request has its turn:
	// a body that has not arrived by then is answered 408 and its connection closed, which
	// gives its bytes of InFlight back. It bounds likewise how long the converted answer may
	// take to be taken by the client: one not written by then is given up and its connection
	// closed, which gives the bytes back too. Zero: DefaultReviewBodyTimeout.
	BodyTimeout time.Duration
}

// ServeHTTP converts the review's objects to its desiredAPIVersion. A review that cannot be
// read gets 400, one larger than MaxBytes 413, one that cannot get its turn in InFlight 503,
// one whose body does not arrive within BodyTimeout of its turn 408, one whose answer is not
// taken within BodyTimeout its connection closed;
// one whose objects cannot be converted gets a review with a Failure result that names the
// object and why, which the API server passes on to its client: the whole review fails, as
// the API requires (convertedObjects must match objects one for one).
func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a ConversionReview", http.StatusMethodNotAllowed)
		return
	}
	limit := h.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxReviewBytes
	}
	if h.InFlight != nil {
		limit = min(limit, h.InFlight.Total())
	}
	// Refused before taking a turn, so that a review that could never be read does not
	// wait for one.
	if r.ContentLength > limit {
		h.tooLarge(w, r, limit)
		return
	}
	if h.InFlight != nil {
		// A body without a length may be as long as the limit, and is read only that far.
		n := r.ContentLength
		if n < 0 {
			n = limit
		}
		if !h.turn(w, r, n) {
			return
		}
		defer h.InFlight.release(n)
	}
	// The deadline runs from the turn, not from the request's first byte as http.Server's
	// ReadTimeout would, which would count the wait for a turn against the body. It bounds
	// the body only: net/http clears it once the body has been read to its end, and sets its
	// own before the connection's next request.
	timeout := h.BodyTimeout
	if timeout <= 0 {
		timeout = DefaultReviewBodyTimeout
	}
	if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		h.log().Warn("review body read without a deadline", "error", err)
	}
	body, err := readBody(w, r, limit)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.tooLarge(w, r, limit)
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		h.bodyTimedOut(w, r, timeout)
		return
	case err != nil:
		http.Error(w, fmt.Sprintf("read the review: %v", err), http.StatusBadRequest)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, fmt.Sprintf("decode the review: %v", err), http.StatusBadRequest)
		return
	}
	if review.APIVersion != apiextensionsv1.SchemeGroupVersion.String() || review.Kind != "ConversionReview" || review.Request == nil {
		http.Error(w, fmt.Sprintf("want a ConversionReview of %s with a request, got %s %s", apiextensionsv1.SchemeGroupVersion, review.APIVersion, review.Kind), http.StatusBadRequest)
		return
	}
	resp := h.convert(review.Request)
	out := apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
	data, err := json.Marshal(out)
	if err != nil {
		http.Error(w, fmt.Sprintf("encode the review: %v", err), http.StatusInternalServerError)
		return
	}
	h.answer(w, r, data, timeout)
}

// answer writes the converted review, which must be taken within timeout: the request holds
// its share of InFlight until the handler returns, and without a deadline a client that never
// reads its answer would keep the handler in Write, and the share, for as long as it keeps the
// connection open. An answer is about as large as its review, and the API server reads it as
// soon as it comes (its client reads the whole body), so the time a body may take to arrive is
// the time an answer may take to leave. http.Server's WriteTimeout would not do: it runs from
// the end of the request's headers, so it would count the wait for a turn and the conversion
// against the answer.
func (h Handler) answer(w http.ResponseWriter, r *http.Request, data []byte, timeout time.Duration) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		h.log().Warn("review answer written without a deadline", "error", err)
	}
	_, err := w.Write(data)
	if err == nil {
		// Flushed here rather than once the handler has returned, so that the log says
		// whether the answer left. net/http clears the deadline after the handler, before the
		// connection's next request.
		err = rc.Flush()
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// net/http closes the connection after a failed write.
		h.log().Warn("review answer not taken in time", "timeout", timeout, "bytes", len(data), "remote", r.RemoteAddr)
	case err != nil:
		h.log().Warn("review answer not sent", "bytes", len(data), "remote", r.RemoteAddr, "error", err)
	}
}

func (h Handler) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	h.log().Warn("review too large", "limit", limit, "contentLength", r.ContentLength)
	http.Error(w, fmt.Sprintf("read the review: larger than %d bytes (--max-review-bytes)", limit), http.StatusRequestEntityTooLarge)
}

// bodyTimedOut answers 408 a request whose body did not arrive within timeout, and has the
// server close the connection: the rest of the body may never come, and the connection can
// carry no other request before it has.
func (h Handler) bodyTimedOut(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	h.log().Warn("review body not received in time", "timeout", timeout, "contentLength", r.ContentLength, "remote", r.RemoteAddr)
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("read the review: its body did not arrive within %s (--review-body-timeout)", timeout), http.StatusRequestTimeout)
}

// turn takes n bytes of InFlight for the request, waiting no longer than its context and
// MaxWait allow. When it cannot, it answers 503 and reports false.
func (h Handler) turn(w http.ResponseWriter, r *http.Request, n int64) bool {
	wait := h.MaxWait
	if wait <= 0 {
		wait = DefaultMaxReviewWait
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	start := time.Now()
	err := h.InFlight.acquire(ctx, n)
	if err == nil {
		return true
	}
	waited := time.Since(start).Round(time.Millisecond)
	h.log().Warn("review not let in: the reviews in flight hold too much", "bytes", n, "inFlight", h.InFlight.inUse(),
		"limit", h.InFlight.Total(), "waited", waited, "error", err)
	w.Header().Set("Retry-After", "1")
	http.Error(w, fmt.Sprintf("review of %d bytes not read: other reviews hold the memory for it (--max-review-bytes-in-flight %d), and it waited %s: %v",
		n, h.InFlight.Total(), waited, err), http.StatusServiceUnavailable)
	return false
}

// readBody reads the body, up to limit bytes. A body that says it is longer is refused before a
// byte of it is read; one that turns out longer is read no further than limit and one byte
// (http.MaxBytesReader, which also has the server close the connection rather than drain the
// rest). Both are an *http.MaxBytesError. A body of known length is read into a buffer of
// that size, not one grown by doubling.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength < 0 {
		return io.ReadAll(body)
	}
	buf := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(body, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

func (h Handler) convert(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, ConvertedObjects: []runtime.RawExtension{}}
	fail := func(msg string) *apiextensionsv1.ConversionResponse {
		h.log().Warn("conversion failed", "uid", req.UID, "to", req.DesiredAPIVersion, "error", msg)
		return &apiextensionsv1.ConversionResponse{UID: req.UID, ConvertedObjects: []runtime.RawExtension{},
			Result: metav1.Status{Status: metav1.StatusFailure, Message: msg}}
	}
	to, err := k8sschema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil {
		return fail(fmt.Sprintf("desiredAPIVersion %q: %v", req.DesiredAPIVersion, err))
	}
	for i, obj := range req.Objects {
		out, notes, err := h.Converter.Convert(obj.Raw, to)
		if err != nil {
			return fail(fmt.Sprintf("convert object %d (%s) to %s: %v", i, identity(obj.Raw), to, err))
		}
		// Converted, but not as asked (an annotation of kept fields unreadable, or holding
		// fields no conversion keeps there): only the log says so (a ConversionResponse
		// carries no warnings). The message is the kind of note, constant.
		for _, note := range notes {
			h.log().Warn(string(note.Kind), "uid", req.UID, "object", identity(obj.Raw), "to", to.String(), "note", note.Text)
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	h.log().Debug("converted", "uid", req.UID, "to", req.DesiredAPIVersion, "objects", len(req.Objects))
	return resp
}

func (h Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}

// identity names an object in an error: namespace/name, or nothing when it has none.
func identity(raw []byte) string {
	var o struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &o)
	return fmt.Sprintf("%s %s/%s", o.APIVersion, o.Metadata.Namespace, o.Metadata.Name)
}
