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

// TestDiskWayOutForbidden: the controller runs as a ServiceAccount with exactly the rules of
// access.Rules. A VM is paused, set to keep its disk (Retain) and deleted, which the pause
// holds; its claim loses its label, so that the controller's cache no longer shows it, and the
// controller's role loses get on claims, as a hand-edited role would. Resumed, the VM's way out
// must read the claim past the cache, and may not: the VM stays Terminating with
// DiskReleaseRefused, Stalled, a message that quotes the API server's refusal and one Warning
// across the retries, and its claim stays as it was, still owned by the VM (gone, the VM would
// leave it to the garbage collector). Once get is granted again the deletion completes by
// itself: the claim is released (the same claim, owned by nothing, marked kept) and the VM goes.
func TestDiskWayOutForbidden(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	installCRDs(t)
	const sa = "vmc"
	kubectl(t, "-n", ns, "create", "serviceaccount", sa)
	gvr := k8sschema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}
	rules := access.Rules(access.Needs{GVR: gvr, WatchNodes: true, WatchCRD: true, Usage: true, Disks: true, Namespace: ns})
	var noGet []access.Rule // rules, but get on claims
	for _, r := range rules {
		if r.Group == "" && r.Resource == "persistentvolumeclaims" {
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "get" })
		}
		noGet = append(noGet, r)
	}
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "clusterrole,clusterrolebinding", ns+"-"+sa, "--ignore-not-found")
	})
	apply(t, rbacFor(ns, sa, rules))
	saConfig := saKubeconfig(t, ns, sa)
	// RBAC changes reach the authorizer's cache within moments, hence the waits.
	eventually(t, 3*time.Minute, func() (bool, string) {
		_, failed, code := checkRows(t, "--kubeconfig", saConfig, "--namespace", ns)
		return code == 0, fmt.Sprintf("check as the ServiceAccount: exit %d, failed %q", code, failed)
	})
	canGet := func(want string) {
		t.Helper()
		eventually(t, 3*time.Minute, func() (bool, string) {
			got, _, _ := runKubectl("", "--kubeconfig", saConfig, "-n", ns, "auth", "can-i", "get", "persistentvolumeclaims")
			return got == want, "can-i get persistentvolumeclaims: " + got
		})
	}
	startController(t, ns, "--kubeconfig", saConfig).waitReady(t)

	diskVM(t, ns, "vm", "1", "1Gi", "")
	waitPhase(t, ns, "vm", "Active", "", 2*time.Minute)
	claim, uid := claimUID(ns, "vm"), field(ns, "vm/vm", ".metadata.uid")
	kubectl(t, "annotate", vmRes, "vm", "-n", ns, "cloudnative.czs/paused=true")
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := condition(ns, "vm", "Paused")
		return got == "True/Paused", "Paused condition " + got
	})
	kubectl(t, "-n", ns, "patch", vmRes, "vm", "--type=merge", "-p", `{"spec":{"rootDiskReclaimPolicy":"Retain"}}`)
	kubectl(t, "-n", ns, "delete", vmRes, "vm", "--wait=false")
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := condition(ns, "vm", "Paused")
		return got == "True/DeletionPaused", "Paused condition " + got
	})
	kubectl(t, "-n", ns, "label", "pvc", "vm-rootdisk", "cloudnative.czs/vm-uid-")
	apply(t, rbacFor(ns, sa, noGet))
	canGet("no")

	kubectl(t, "annotate", vmRes, "vm", "-n", ns, "cloudnative.czs/paused-")
	waitPhase(t, ns, "vm", "Terminating", "DiskReleaseRefused", 3*time.Minute)
	if msg := field(ns, "vm/vm", ".status.message"); !strings.Contains(msg, `cannot get resource "persistentvolumeclaims"`) {
		t.Errorf("message %q does not quote the refusal", msg)
	}
	if got := condition(ns, "vm", "Stalled"); got != "True/DiskReleaseRefused" {
		t.Errorf("Stalled condition %q, want True/DiskReleaseRefused", got)
	}
	const claimFields = `.metadata.uid}|{.metadata.ownerReferences[0].uid}|{.metadata.deletionTimestamp}|{.metadata.annotations.cloudnative\.czs/kept`
	if got := field(ns, "pvc/vm-rootdisk", claimFields); got != claim+"|"+uid+"||" {
		t.Fatalf("claim uid|owner|deletion|kept = %q while it may not be read, want %s|%s||", got, claim, uid)
	}
	eventually(t, time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "vm", "DiskReleaseRefused")
		return n >= 1, fmt.Sprintf("DiskReleaseRefused Events: %d (%q)", n, notes)
	})
	time.Sleep(75 * time.Second) // past a retry (every minute)
	if got := vmField(ns, "vm", ".metadata.name"); got != "vm" {
		t.Fatalf("the VM went while its claim could not be read: %q", got)
	}
	if n, notes := occurrences(t, ns, "vm", "DiskReleaseRefused"); n != 1 {
		t.Errorf("DiskReleaseRefused Events after a retry: %d (%q), want 1", n, notes)
	}

	apply(t, rbacFor(ns, sa, rules))
	canGet("yes")
	eventually(t, 3*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", vmRes, "vm")
		return isNotFound(err), fmt.Sprintf("VM still there: %v", err)
	})
	// The garbage collector had its chance: the VM is gone, and what it owned with it.
	eventually(t, time.Minute, func() (bool, string) {
		got := field(ns, "pvc/vm-rootdisk", claimFields)
		return got == claim+"|||true", fmt.Sprintf("claim uid|owner|deletion|kept = %q, want %s|||true", got, claim)
	})
}
