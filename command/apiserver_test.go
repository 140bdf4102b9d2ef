package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes/scheme"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/crds"
)

// fakeAPIServer answers what the start-up of run and check asks an API server (discovery of
// the VM resource's group/version, its CRD, SelfSubjectAccessReviews) and counts every
// request, so that a test can tell how often the CRD was read. Anything else gets a 404.
type fakeAPIServer struct {
	*httptest.Server
	gvr  k8sschema.GroupVersionResource
	crd  []byte // the CRD as JSON; nil: it does not exist
	deny string // a verb every review denies; empty: all allowed
	// denies, when set, is what else the reviews deny.
	denies func(*authorizationv1.ResourceAttributes) bool
	// subjects are the users whose SubjectAccessReviews it answers as reviews of theirs
	// (deny applies); any other user is denied everything. nil: SubjectAccessReviews are
	// forbidden, as to a caller without create on them.
	subjects []string
	// classes are the StorageClasses it lists, by name, each with whether it is the
	// default; nil: the list is forbidden.
	classes map[string]bool
	// namespaces are the namespaces it lists, each with whether it is being deleted; nil:
	// the one a list selects by name exists.
	namespaces map[string]bool

	mu       sync.Mutex
	requests []string // "METHOD path", in order
	// onRequest, when set, sees every request's "METHOD path" first (outside mu).
	onRequest func(string)
}

func newFakeAPIServer(t *testing.T, gvr k8sschema.GroupVersionResource, crd []byte) *fakeAPIServer {
	t.Helper()
	s := &fakeAPIServer{gvr: gvr, crd: crd, classes: map[string]bool{"standard": true, "fixed-size": false}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	req := r.Method + " " + r.URL.Path
	s.mu.Lock()
	s.requests = append(s.requests, req)
	on := s.onRequest
	s.mu.Unlock()
	if on != nil {
		on(req)
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/apis/"+s.gvr.GroupVersion().String():
		fmt.Fprintf(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":%q,"resources":[{"name":%q,"namespaced":true,"kind":"VirtualMachine","verbs":["get","list","watch","patch"]}]}`,
			s.gvr.GroupVersion().String(), s.gvr.Resource)
	case r.Method == http.MethodGet && r.URL.Path == s.crdPath():
		if s.crd == nil {
			notFound(w, crds.GVR.GroupResource(), crds.Name(s.gvr))
			return
		}
		_, _ = w.Write(s.crd)
	case r.Method == http.MethodGet && r.URL.Path == "/apis/storage.k8s.io/v1/storageclasses":
		if s.classes == nil {
			status := apierrors.NewForbidden(k8sschema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, "", errors.New("RBAC says no")).Status()
			status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(status)
			return
		}
		var items []string
		for name, isDefault := range s.classes {
			items = append(items, fmt.Sprintf(`{"metadata":{"name":%q,"annotations":{"storageclass.kubernetes.io/is-default-class":"%t"}},"provisioner":"p"}`, name, isDefault))
		}
		fmt.Fprintf(w, `{"kind":"StorageClassList","apiVersion":"storage.k8s.io/v1","metadata":{},"items":[%s]}`, strings.Join(items, ","))
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces":
		selected := strings.TrimPrefix(r.URL.Query().Get("fieldSelector"), "metadata.name=")
		var items []string
		for name, deleting := range s.namespaces {
			if name == selected {
				phase := map[bool]string{false: "Active", true: "Terminating"}[deleting]
				items = append(items, fmt.Sprintf(`{"metadata":{"name":%q},"status":{"phase":%q}}`, name, phase))
			}
		}
		if s.namespaces == nil && selected != "" {
			items = append(items, fmt.Sprintf(`{"metadata":{"name":%q},"status":{"phase":"Active"}}`, selected))
		}
		fmt.Fprintf(w, `{"kind":"NamespaceList","apiVersion":"v1","metadata":{},"items":[%s]}`, strings.Join(items, ","))
	case r.Method == http.MethodPost && r.URL.Path == accessReviewPath:
		answerAccessReview(w, r, func(a *authorizationv1.ResourceAttributes) bool {
			return a.Verb != s.deny && (s.denies == nil || !s.denies(a))
		})
	case r.Method == http.MethodPost && r.URL.Path == subjectAccessReviewPath && s.subjects == nil:
		forbidden(w, apierrors.NewForbidden(k8sschema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "",
			errors.New(`User "fake" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`)))
	case r.Method == http.MethodPost && r.URL.Path == subjectAccessReviewPath:
		answerSubjectAccessReview(w, r, func(spec authorizationv1.SubjectAccessReviewSpec) bool {
			a := spec.ResourceAttributes
			return slices.Contains(s.subjects, spec.User) && a.Verb != s.deny && (s.denies == nil || !s.denies(a))
		})
	default:
		notFound(w, k8sschema.GroupResource{Resource: r.URL.Path}, "")
	}
}

// accessReviewPath is where client-go posts a SelfSubjectAccessReview.
const accessReviewPath = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

// answerAccessReview answers the SelfSubjectAccessReview posted in r with whether allowed
// allows its resource attributes; 400 for a body that is none. client-go sends built-in types
// as protobuf: it is decoded as the API server would.
func answerAccessReview(w http.ResponseWriter, r *http.Request, allowed func(*authorizationv1.ResourceAttributes) bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	review, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
	if err != nil || !ok || review.Spec.ResourceAttributes == nil {
		http.Error(w, fmt.Sprintf("not a SelfSubjectAccessReview: %v", err), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":%t}}`, allowed(review.Spec.ResourceAttributes))
}

// subjectAccessReviewPath is where client-go posts a SubjectAccessReview.
const subjectAccessReviewPath = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

// answerSubjectAccessReview answers the SubjectAccessReview posted in r with whether allowed
// allows its spec; 400 for a body that is none, as answerAccessReview.
func answerSubjectAccessReview(w http.ResponseWriter, r *http.Request, allowed func(authorizationv1.SubjectAccessReviewSpec) bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	review, ok := obj.(*authorizationv1.SubjectAccessReview)
	if err != nil || !ok || review.Spec.ResourceAttributes == nil {
		http.Error(w, fmt.Sprintf("not a SubjectAccessReview: %v", err), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":%t}}`, allowed(review.Spec))
}

// notFound answers as the API server does for an object or a path it does not have.
func notFound(w http.ResponseWriter, gr k8sschema.GroupResource, name string) {
	status := apierrors.NewNotFound(gr, name).Status()
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(status)
}

// crdPath is where the CRD of the VM resource is read by name.
func (s *fakeAPIServer) crdPath() string {
	return "/apis/" + crds.GVR.GroupVersion().String() + "/" + crds.GVR.Resource + "/" + crds.Name(s.gvr)
}

// count is how many requests were "METHOD path".
func (s *fakeAPIServer) count(req string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r == req {
			n++
		}
	}
	return n
}

// crdReads is how many times the CRD was read by name.
func (s *fakeAPIServer) crdReads() int { return s.count("GET " + s.crdPath()) }

// kubeconfig writes a kubeconfig for the server and returns its path.
func (s *fakeAPIServer) kubeconfig(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {token: fake}}]
contexts: [{name: fake, context: {cluster: fake, user: fake, namespace: default}}]
current-context: fake
`, s.URL)
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// establishedCRD reads a CRD file of the repository as the API server would return it once
// Established, as JSON.
func establishedCRD(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}}
	def, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// lockedBuffer is a log destination that goroutines still running after a command returned
// (an informer's last words) can write to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
