package command

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/access"
)

// TestCheckAccessAsServiceAccount: with --service-account the rbac rows are
// SubjectAccessReviews of the ServiceAccount (its user and groups as the API server
// authenticates its token), never SelfSubjectAccessReviews of the caller, who as an
// administrator passed every row whatever the ServiceAccount was granted. Each row names the
// ServiceAccount; a verb the controller works without denied is a WARN; a caller refused the
// reviews themselves gets one failed row that says so, not a row per rule with the same text.
func TestCheckAccessAsServiceAccount(t *testing.T) {
	sa := &serviceAccount{Namespace: "vm-controller", Name: "vm-controller"}
	const whose = "ServiceAccount vm-controller/vm-controller: "
	metricsList := func(a *authorizationv1.ResourceAttributes) bool {
		return a.Group == "metrics.k8s.io" && a.Resource == "pods" && a.Verb == "list"
	}
	needs := access.Needs{GVR: ownGVR, WatchNodes: true, WatchCRD: true, LeaderElect: true, Usage: true, Disks: true, Namespace: "vms"}
	rules := len(access.Rules(needs))
	tests := map[string]struct {
		as      *serviceAccount
		deny    func(*authorizationv1.ResourceAttributes) bool // nil: allow all
		refuse  bool                                           // the review's create is forbidden
		results map[string]int                                 // rows by result
		says    string                                         // a row's result and what its detail holds
	}{
		"allowed": {as: sa, results: map[string]int{"pass": rules}, says: "pass " + whose + "get, list, watch, create, patch, delete pods in namespace vms"},
		"denied": {as: sa, deny: func(a *authorizationv1.ResourceAttributes) bool {
			return a.Resource == "pods" && a.Subresource == "" && a.Verb == "delete"
		},
			results: map[string]int{"pass": rules - 1, "FAIL": 1},
			says:    "FAIL " + whose + "RBAC denies delete on pods in namespace vms (needed: creates, watches and deletes the server pods"},
		"degrades": {as: sa, deny: metricsList, results: map[string]int{"pass": rules - 1, "WARN": 1},
			says: "WARN " + whose + "RBAC denies list on pods.metrics.k8s.io in namespace vms: usage is read one request per VM"},
		"caller may not create SubjectAccessReviews": {as: sa, refuse: true, results: map[string]int{"FAIL": 1},
			says: `FAIL cannot review the access of ServiceAccount vm-controller/vm-controller: subjectaccessreviews.authorization.k8s.io is forbidden: User "jane" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope; --service-account takes create on subjectaccessreviews.authorization.k8s.io`},
		// Without --service-account, the caller's own access, as before.
		"the kubeconfig's identity": {deny: metricsList, results: map[string]int{"pass": rules - 1, "WARN": 1},
			says: "WARN RBAC denies list on pods.metrics.k8s.io in namespace vms: usage is read one request per VM"},
		"the kubeconfig's identity refused its reviews": {refuse: true, results: map[string]int{"FAIL": 1},
			says: "FAIL cannot review the kubeconfig's access: selfsubjectaccessreviews.authorization.k8s.io is forbidden"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientset()
			verdict := func(resource string, attrs *authorizationv1.ResourceAttributes) (bool, runtime.Object, error) {
				if tc.refuse {
					return true, nil, apierrors.NewForbidden(k8sschema.GroupResource{Group: "authorization.k8s.io", Resource: resource}, "",
						errors.New(`User "jane" cannot create resource "`+resource+`" in API group "authorization.k8s.io" at the cluster scope`))
				}
				return false, nil, nil
			}
			kube.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
				review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
				if tc.as == nil {
					t.Errorf("a SubjectAccessReview without --service-account: %+v", review.Spec)
				}
				if handled, obj, err := verdict("subjectaccessreviews", review.Spec.ResourceAttributes); handled {
					return handled, obj, err
				}
				if want := []string{"system:serviceaccounts", "system:serviceaccounts:vm-controller", "system:authenticated"}; review.Spec.User != "system:serviceaccount:vm-controller:vm-controller" ||
					!slices.Equal(review.Spec.Groups, want) {
					t.Errorf("reviewed user %q, groups %q; want the ServiceAccount's user and groups %q", review.Spec.User, review.Spec.Groups, want)
				}
				review.Status.Allowed = tc.deny == nil || !tc.deny(review.Spec.ResourceAttributes)
				return true, review, nil
			})
			kube.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
				review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
				if tc.as != nil {
					t.Errorf("a SelfSubjectAccessReview with --service-account: %+v", review.Spec)
				}
				if handled, obj, err := verdict("selfsubjectaccessreviews", review.Spec.ResourceAttributes); handled {
					return handled, obj, err
				}
				review.Status.Allowed = tc.deny == nil || !tc.deny(review.Spec.ResourceAttributes)
				return true, review, nil
			})
			rows := checkAccess(context.Background(), kube, needs, "vms", "vm-controller", tc.as)
			got := map[string]int{}
			for _, r := range rows {
				got[r.result()]++
				if r.name != "rbac" {
					t.Errorf("row %s, want rbac", r.name)
				}
				if tc.as != nil && !tc.refuse && !strings.HasPrefix(r.detail, whose) {
					t.Errorf("row %q does not name the ServiceAccount", r.detail)
				}
			}
			if !maps.Equal(got, tc.results) {
				t.Errorf("rows by result %v, want %v", got, tc.results)
			}
			if !slices.ContainsFunc(rows, func(r checkResult) bool { return strings.Contains(r.result()+" "+r.detail, tc.says) }) {
				t.Errorf("no row says %q:\n%s", tc.says, rowsText(rows))
			}
		})
	}
}

func rowsText(rows []checkResult) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r.name + " " + r.result() + " " + r.detail + "\n")
	}
	return b.String()
}

// TestCheckServiceAccount runs check --service-account whole against a fake API server: the
// reviews go over the wire as SubjectAccessReviews of the ServiceAccount, the Lease is
// looked for in the ServiceAccount's namespace (where run in its pod keeps it) unless
// --lease-namespace says otherwise, and a caller who may not create SubjectAccessReviews
// gets one failed rbac row and exit 1.
func TestCheckServiceAccount(t *testing.T) {
	tests := map[string]struct {
		subjects []string // whose reviews the server answers; nil: it forbids them
		args     []string
		rows     []string // rows of the table, by their start
		exit     string   // check's error; "" for none
	}{
		"the Lease in the ServiceAccount's namespace": {subjects: []string{"system:serviceaccount:ctl:vmc"},
			rows: []string{"rbac       pass    ServiceAccount ctl/vmc: get, create, update leases.coordination.k8s.io in namespace ctl"}},
		"--lease-namespace": {subjects: []string{"system:serviceaccount:ctl:vmc"}, args: []string{"--lease-namespace", "elsewhere"},
			rows: []string{"rbac       pass    ServiceAccount ctl/vmc: get, create, update leases.coordination.k8s.io in namespace elsewhere"}},
		"another ServiceAccount's grants": {subjects: []string{"system:serviceaccount:ctl:other"},
			rows: []string{"rbac       FAIL    ServiceAccount ctl/vmc: RBAC denies list, watch on virtualmachines.cloudnative.czs in all namespaces"},
			exit: "checks failed"},
		"reviews forbidden": {
			rows: []string{`rbac       FAIL    cannot review the access of ServiceAccount ctl/vmc: subjectaccessreviews.authorization.k8s.io is forbidden: User "fake" cannot create resource "subjectaccessreviews"`},
			exit: "1 of 4 checks failed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := newFakeAPIServer(t, ownGVR, establishedCRD(t, ownCRDFile))
			srv.subjects = tc.subjects
			var out bytes.Buffer
			a := App("")
			a.Writer, a.ErrWriter = &out, &out
			args := append([]string{"vm-controller", "check", "--kubeconfig", srv.kubeconfig(t), "--root-disk", "ephemeral", "--leader-elect",
				"--service-account", "ctl/vmc"}, tc.args...)
			err := a.Run(args)
			if got := errString(err); tc.exit == "" && got != "" || !strings.Contains(got, tc.exit) {
				t.Errorf("check: %q, want %q\n%s", got, tc.exit, out.String())
			}
			lines := strings.Split(out.String(), "\n")
			for _, want := range tc.rows {
				if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
					t.Errorf("no row %q:\n%s", want, out.String())
				}
			}
			if srv.count("POST "+accessReviewPath) != 0 {
				t.Errorf("check --service-account reviewed the kubeconfig's own access")
			}
		})
	}
}
