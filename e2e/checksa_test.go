//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/access"
)

// TestCheckServiceAccount runs check --service-account against the cluster's authorizer: as
// the admin, whose own rows would all pass, the rows are the ServiceAccount's (the
// SubjectAccessReviews carry its user and groups as its token would); the ServiceAccount
// itself, which may not create SubjectAccessReviews, gets one failed row that says so; and
// once it is granted what the manifests grant but list on pod metrics, check passes with
// one WARN row and exits 0.
func TestCheckServiceAccount(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	installCRDs(t)
	gvr := k8sschema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1beta1", Resource: "virtualmachines"}
	rules := access.Rules(access.Needs{GVR: gvr, WatchNodes: true, WatchCRD: true, Usage: true, Disks: true})
	const sa = "vmc"
	whose := fmt.Sprintf("ServiceAccount %s/%s: ", ns, sa)
	flags := []string{"--api-version", "cloudnative.czs/v1beta1", "--namespace", ns, "--service-account", ns + "/" + sa}

	kubectl(t, "-n", ns, "create", "serviceaccount", sa)
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "clusterrole,clusterrolebinding", ns+"-"+sa, "--ignore-not-found")
	})
	apply(t, rbacFor(ns, sa, []access.Rule{{Group: "cloudnative.czs", Resource: "virtualmachines", Verbs: []string{"list", "watch"}}}))

	// As the admin: the ServiceAccount may list and watch VMs and nothing else. RBAC changes
	// reach the authorizer's cache within moments, hence the wait.
	eventually(t, 3*time.Minute, func() (bool, string) {
		rows, failed, code := checkRows(t, append([]string{"--kubeconfig", kubeconfig}, flags...)...)
		want := fmt.Sprintf("%sRBAC denies patch on virtualmachines.cloudnative.czs in namespace %s (needed: adds and removes the cleanup finalizer)", whose, ns)
		ok := code == 1 && slices.Contains(rows, "crd pass") && slices.Contains(failed, want) && len(failed) == len(rules)-1 &&
			!slices.ContainsFunc(failed, func(f string) bool { return !strings.HasPrefix(f, whose) })
		return ok, fmt.Sprintf("exit %d, rows %v, failed:\n%s", code, rows, strings.Join(failed, "\n"))
	})

	// As the ServiceAccount, which may not review another's access.
	rows, failed, code := checkRows(t, append([]string{"--kubeconfig", saKubeconfig(t, ns, sa)}, flags...)...)
	want := fmt.Sprintf(`cannot review the access of ServiceAccount %s/%s: subjectaccessreviews.authorization.k8s.io is forbidden: User "system:serviceaccount:%s:%s" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`, ns, sa, ns, sa)
	rbac := slices.DeleteFunc(slices.Clone(rows), func(r string) bool { return !strings.HasPrefix(r, "rbac ") })
	if code != 1 || len(rbac) != 1 || !slices.ContainsFunc(failed, func(f string) bool { return strings.HasPrefix(f, want) }) {
		t.Errorf("check as the ServiceAccount: exit %d, rows %v, failed:\n%s\nwant one rbac row starting %q", code, rows, strings.Join(failed, "\n"), want)
	}

	// What the manifests grant, but list on pod metrics: a WARN, and exit 0.
	granted := slices.Clone(rules)
	for i, r := range granted {
		if r.Group == "metrics.k8s.io" {
			granted[i].Verbs = []string{"get"}
		}
	}
	apply(t, rbacFor(ns, sa, granted))
	eventually(t, 3*time.Minute, func() (bool, string) {
		rows, failed, code := checkRows(t, append([]string{"--kubeconfig", kubeconfig}, flags...)...)
		var warn, pass int
		for _, r := range rows {
			switch r {
			case "rbac WARN":
				warn++
			case "rbac pass":
				pass++
			}
		}
		return code == 0 && warn == 1 && pass == len(rules)-1, fmt.Sprintf("exit %d, rows %v, failed %q", code, rows, failed)
	})
}
