package command

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/access"
)

// TestCheckRuleDegrades: a verb the controller works without (access.Rule.Degrades: list on
// pod metrics, which usage by one list needs) denied is a warning that says what is lost, so
// that an install whose RBAC predates it keeps running; any other verb denied fails the check.
func TestCheckRuleDegrades(t *testing.T) {
	var rule access.Rule
	for _, r := range access.Rules(access.Needs{Usage: true}) {
		if r.Group == "metrics.k8s.io" {
			rule = r
		}
	}
	if rule.Resource == "" {
		t.Fatal("no rule for metrics.k8s.io")
	}
	for name, tc := range map[string]struct {
		deny string // the verb denied; "" for none
		want string // the result
		says string // in the detail
	}{
		"all granted": {want: "pass", says: "get, list pods.metrics.k8s.io"},
		"list denied": {deny: "list", want: "WARN", says: "RBAC denies list on pods.metrics.k8s.io in all namespaces: usage is read one request per VM"},
		"get denied":  {deny: "get", want: "FAIL", says: "RBAC denies get on pods.metrics.k8s.io in all namespaces (needed: samples the usage"},
	} {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientset()
			kube.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
				review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
				review.Status.Allowed = review.Spec.ResourceAttributes.Verb != tc.deny
				return true, review, nil
			})
			got, refused := checkRule(context.Background(), reviewer{kube: kube}, rule, "")
			if refused != nil {
				t.Fatalf("review refused: %v", refused)
			}
			if got.result() != tc.want || !strings.Contains(got.detail, tc.says) {
				t.Errorf("%s: %s, want %s saying %q", got.result(), got.detail, tc.want, tc.says)
			}
		})
	}
}
