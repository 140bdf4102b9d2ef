package command

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/internal/golden"
)

// docHost is the address of the cluster in the guide's samples; the fake API server's own,
// which changes with every run, is written as it.
const docHost = "https://127.0.0.1:6443"

// The identities of the guide's samples, as the kubeconfig a command names: without
// --kubeconfig, an administrator's, which may do anything; sa.kubeconfig, a ServiceAccount's
// that may only list and watch VMs. Each sample has a server of its own, which answers as
// the sample's identity.
const (
	saKubeconfig = "sa.kubeconfig"
	saUser       = "system:serviceaccount:vms:vm-controller"
)

// installedSA is the user of the ServiceAccount that check --service-account reviews in the
// guide: the controller's as manifests installs it, granted what its manifests grant but
// list on pod metrics (an install whose RBAC predates it). The administrator may review it;
// the ServiceAccount of sa.kubeconfig may not.
const installedSA = "system:serviceaccount:vm-controller:vm-controller"

// TestCheckDoc runs the samples of check and run in docs/plan-and-check.md against a fake API
// server and fails when one shows another output than the command prints, so the guide
// cannot drift from the binary (it said "the 24 paths of the field map" where check printed
// 31, and left out RBAC rows and failures added since). A sample is a ``` block whose first
// line is "$ vm-controller check ..." or "$ vm-controller run ...", followed by what the
// command prints to stdout and stderr (main's "vm-controller: " lines for an error). The
// server holds this project's CRD, a default StorageClass, and answers access reviews for
// the identity of the command's kubeconfig, and SubjectAccessReviews of installedSA for the
// administrator. With -update the test rewrites the outputs.
func TestCheckDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", planDoc))
	if err != nil {
		t.Fatal(err)
	}
	got, n := renderCheckDoc(t, string(doc))
	if n < 2 {
		t.Fatalf("%s: %d samples of check and run, want the check table and run's failures", planDoc, n)
	}
	golden.Check(t, filepath.Join("..", planDoc), []byte(got))
}

// renderCheckDoc is the guide with each sample's output replaced by what its command prints,
// and the number of samples.
func renderCheckDoc(t *testing.T, doc string) (string, int) {
	t.Helper()
	lines := strings.SplitAfter(doc, "\n")
	var out strings.Builder
	samples := 0
	for i := 0; i < len(lines); i++ {
		out.WriteString(lines[i])
		fence := strings.TrimRight(lines[i], "\n")
		if !strings.HasPrefix(fence, "```") {
			continue
		}
		end := i + 1
		for end < len(lines) && strings.TrimRight(lines[end], "\n") != "```" {
			end++
		}
		if end == len(lines) {
			t.Fatalf("%s:%d: the block is not closed", planDoc, i+1)
		}
		body := lines[i+1 : end]
		cmd, isSample := "", false
		if len(body) > 0 {
			cmd, isSample = strings.CutPrefix(strings.TrimRight(body[0], "\n"), "$ ")
			isSample = isSample && (strings.HasPrefix(cmd, "vm-controller check") || strings.HasPrefix(cmd, "vm-controller run"))
		}
		switch {
		case isSample && fence == "```":
			out.WriteString(body[0])
			out.WriteString(runDocSample(t, fmt.Sprintf("%s:%d", planDoc, i+2), cmd))
			samples++
		default:
			text := strings.Join(body, "")
			if strings.Contains(text, "vm-controller check") && fence != "```console" {
				t.Errorf("%s:%d: a block shows vm-controller check without its output: make it a ``` block that starts with \"$ vm-controller check ...\", which TestCheckDoc checks", planDoc, i+1)
			}
			if fence == "```" && slices.ContainsFunc(body[1:], func(l string) bool { return strings.HasPrefix(l, "$ vm-controller") }) {
				t.Errorf("%s:%d: a sample holds one command, on its first line", planDoc, i+1)
			}
			out.WriteString(text)
		}
		out.WriteString(lines[end])
		i = end
	}
	return out.String(), samples
}

// runDocSample runs one sample's command against a fake API server and returns what it
// prints, as a terminal would show it.
func runDocSample(t *testing.T, where, cmd string) string {
	t.Helper()
	args := strings.Fields(cmd)
	sa := slices.Contains(args, saKubeconfig)
	srv := newDocAPIServer(t, sa)
	for i, a := range args {
		if a == saKubeconfig {
			args[i] = srv.kubeconfig(t, "sa")
		}
	}
	if !slices.Contains(args, "--kubeconfig") {
		t.Setenv("KUBECONFIG", srv.kubeconfig(t, "admin"))
	}
	if args[1] == "run" {
		// Should its checks pass, run starts a controller: on no port of the machine's.
		args = append(args, "--metrics-addr=", "--health-addr=")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var stdout, stderr lockedBuffer
	a := App("")
	a.Writer, a.ErrWriter = &stdout, &stderr
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.RunContext(ctx, args); err != nil {
			fmt.Fprintf(&stderr, "vm-controller: %v\n", err) // as main prints it
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%s: %q did not return:\n%s%s", where, cmd, stdout.String(), stderr.String())
	}
	return strings.ReplaceAll(stdout.String()+stderr.String(), srv.URL, docHost)
}

// docAPIServer is the fake API server of one sample: fakeAPIServer's answers, with access
// reviews, the CRD and the StorageClasses answered for the sample's identity.
type docAPIServer struct {
	*fakeAPIServer
	sa bool // the ServiceAccount's identity, else the administrator's
}

func newDocAPIServer(t *testing.T, sa bool) *docAPIServer {
	t.Helper()
	s := &docAPIServer{fakeAPIServer: &fakeAPIServer{gvr: ownGVR, crd: establishedCRD(t, ownCRDFile), classes: map[string]bool{"standard": true},
		namespaces: map[string]bool{"vms": false}}, sa: sa}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *docAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	sa := s.sa
	switch {
	case r.Method == http.MethodPost && r.URL.Path == accessReviewPath:
		answerAccessReview(w, r, func(a *authorizationv1.ResourceAttributes) bool {
			return !sa || (a.Group == ownGVR.Group && a.Resource == ownGVR.Resource && a.Subresource == "" && (a.Verb == "list" || a.Verb == "watch"))
		})
	case sa && r.Method == http.MethodPost && r.URL.Path == subjectAccessReviewPath:
		forbidden(w, apierrors.NewForbidden(k8sschema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "",
			fmt.Errorf("User %q cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope", saUser)))
	case r.Method == http.MethodPost && r.URL.Path == subjectAccessReviewPath:
		answerSubjectAccessReview(w, r, func(spec authorizationv1.SubjectAccessReviewSpec) bool {
			a := spec.ResourceAttributes
			return spec.User == installedSA && !(a.Group == "metrics.k8s.io" && a.Resource == "pods" && a.Verb == "list")
		})
	case sa && r.Method == http.MethodGet && r.URL.Path == s.crdPath():
		forbidden(w, apierrors.NewForbidden(crds.GVR.GroupResource(), crds.Name(s.gvr),
			fmt.Errorf("User %q cannot get resource %q in API group %q at the cluster scope", saUser, crds.GVR.Resource, crds.GVR.Group)))
	case sa && r.Method == http.MethodGet && r.URL.Path == "/apis/storage.k8s.io/v1/storageclasses":
		forbidden(w, apierrors.NewForbidden(k8sschema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, "",
			fmt.Errorf("User %q cannot list resource \"storageclasses\" in API group \"storage.k8s.io\" at the cluster scope", saUser)))
	default:
		s.fakeAPIServer.serve(w, r)
	}
}

// forbidden answers with the API server's Status of err, a 403.
func forbidden(w http.ResponseWriter, err *apierrors.StatusError) {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(status)
}

// kubeconfig writes a kubeconfig for the server, for the user token, in namespace vms.
func (s *docAPIServer) kubeconfig(t *testing.T, token string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), token+".kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: %s, user: {token: %s}}]
contexts: [{name: fake, context: {cluster: fake, user: %s, namespace: vms}}]
current-context: fake
`, s.URL, token, token, token)
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
