package decision_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestFromAdmission: the tolerations admission gave a server read in the messages of the room
// check as the taints they take, each operator in its own form, the first four by name and the
// rest counted.
func TestFromAdmission(t *testing.T) {
	tol := func(key string, op corev1.TolerationOperator, value string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect}
	}
	for want, ts := range map[string][]corev1.Toleration{
		"":                        nil,
		"team=a:NoSchedule":       {tol("team", corev1.TolerationOpEqual, "a", corev1.TaintEffectNoSchedule)},
		"team=a":                  {tol("team", "", "a", "")},
		"team:NoExecute":          {tol("team", corev1.TolerationOpEqual, "", corev1.TaintEffectNoExecute)},
		"gpu=*, gpu=*:NoSchedule": {tol("gpu", corev1.TolerationOpExists, "", ""), tol("gpu", corev1.TolerationOpExists, "", corev1.TaintEffectNoSchedule)},
		"every taint":             {tol("", corev1.TolerationOpExists, "", "")},
		"every NoSchedule taint":  {tol("", corev1.TolerationOpExists, "", corev1.TaintEffectNoSchedule)},
		"n>2:NoSchedule (not counted), n<5 (not counted)": {tol("n", "Gt", "2", corev1.TaintEffectNoSchedule), tol("n", "Lt", "5", "")},
		"a=*, b=*, c=*, d=* and 2 more": {tol("a", corev1.TolerationOpExists, "", ""), tol("b", corev1.TolerationOpExists, "", ""),
			tol("c", corev1.TolerationOpExists, "", ""), tol("d", corev1.TolerationOpExists, "", ""),
			tol("e", corev1.TolerationOpExists, "", ""), tol("f", corev1.TolerationOpExists, "", "")},
	} {
		if got := decision.FromAdmission(ts); got != want {
			t.Errorf("%+v: %q, want %q", ts, got, want)
		}
	}
}
