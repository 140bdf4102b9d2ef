package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

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
// k8s.io/apiserver pkg/server/config.go; etcd keeps 1.5 MiB at most); for a list, every item of
// the page, as many as the client's limit (kubectl asks for 500), or every object when the
// list is served from the watch cache without one. So unlike an admission review, which holds
// two objects and which controller-runtime caps at 7 MiB (2 x 3 MiB, and 1 MiB for the rest:
// maxRequestSize in sigs.k8s.io/controller-runtime pkg/webhook/admission/http.go; its
// conversion webhook reads without a cap), a conversion review has no size the API server
// never exceeds. The default holds a page of 500 VMs many times over and an unpaginated list
// of about thirteen thousand (a VM is about 1.2 KB with its managed fields), while what the
// handler holds for it (the body, the decoded review, the converted objects and the answer:
// about four times the body, measured) stays well within the memory limit of the webhook's
// Deployment (256Mi), garbage collection's headroom included. A larger cluster whose clients
// list a converted version without pages raises it, and the memory limit with it.
const DefaultMaxReviewBytes = 16 << 20

// Handler answers ConversionReviews posted to it.
type Handler struct {
	Converter *convert.Converter
	Log       *slog.Logger
	// MaxBytes bounds a review's body: a longer one is answered 413 Request Entity Too
	// Large, having been read no further than the bound. Zero: DefaultMaxReviewBytes.
	MaxBytes int64
}

// ServeHTTP converts the review's objects to its desiredAPIVersion. A review that cannot be
// read gets 400, one larger than MaxBytes 413; one whose objects cannot be converted gets a
// review with a Failure result that names the object and why, which the API server passes on
// to its client: the whole review fails, as the API requires (convertedObjects must match
// objects one for one).
func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a ConversionReview", http.StatusMethodNotAllowed)
		return
	}
	limit := h.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxReviewBytes
	}
	body, err := readBody(w, r, limit)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.log().Warn("review too large", "limit", limit, "contentLength", r.ContentLength)
		http.Error(w, fmt.Sprintf("read the review: larger than %d bytes (--max-review-bytes)", limit), http.StatusRequestEntityTooLarge)
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
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
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
		out, err := h.Converter.Convert(obj.Raw, to)
		if err != nil {
			return fail(fmt.Sprintf("convert object %d (%s) to %s: %v", i, identity(obj.Raw), to, err))
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
