//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// refuseUnless makes the API server refuse, with message, every write in ns that rule (one
// entry of a ValidatingAdmissionPolicy's matchConstraints.resourceRules, as a YAML flow
// mapping) matches and whose CEL expression does not hold: the way a test stands for a
// cluster's own policy, or makes the controller's writes fail on purpose. The policy and its
// binding are cluster-scoped, both named ns (so that a test may delete the binding by name to
// lift the refusal), bound to ns alone (by namespaceSelector) so that other tests' writes go
// through, and deleted when the test ends. It returns once the policy is in force: the API
// server loads new policies into a cache of its own in the background, so a write right after
// the binding could still go through; probe is a kubectl call (a server-side dry run of such a
// write) that goes through the same admission and fails with message once it does.
func refuseUnless(t *testing.T, ns, rule, expression, message string, probe ...string) {
	t.Helper()
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", ns, "--ignore-not-found")
	})
	apply(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - %[2]s
  validations:
  - expression: %[3]q
    message: %[4]q
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: %[1]s}
`, ns, rule, expression, message))
	eventually(t, time.Minute, func() (bool, string) {
		_, err := kubectlErr(probe...)
		return err != nil && strings.Contains(err.Error(), message), fmt.Sprintf("kubectl %s: %v", strings.Join(probe, " "), err)
	})
}
