package webhook

import (
	"encoding/json"
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

// maxReview bounds a review's body. The API server sends one object per review for a get or
// an update, and a page of a list (500 objects by default) otherwise.
const maxReview = 64 << 20

// Handler answers ConversionReviews posted to it.
type Handler struct {
	Converter *convert.Converter
	Log       *slog.Logger
}

// ServeHTTP converts the review's objects to its desiredAPIVersion. A review that cannot be
// read gets 400; one whose objects cannot be converted gets a review with a Failure result
// that names the object and why, which the API server passes on to its client: the whole
// review fails, as the API requires (convertedObjects must match objects one for one).
func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a ConversionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReview+1))
	if err != nil || len(body) > maxReview {
		http.Error(w, "read the review: too large or cut short", http.StatusBadRequest)
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
