//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// What a server was made for, against a real API server's admission: a policy rewrites every
// server pod at its create, as clusters do (an image pinned to its digest on a registry mirror,
// cpu rounded up to the least a platform sells), and the controller must take the pod for the
// server its VM asks for, through the annotations cloudnative.czs/image and
// cloudnative.czs/resources (backend/pods/madefor.go), rather than replace or resize it for
// ever.

// mirror and pinnedDigest are what rewriteServers makes of an image: mirror/IMAGE@pinnedDigest.
const (
	mirror       = "mirror.e2e.example.org"
	pinnedDigest = "sha256:0b6f1c1e5d5e4c6a9d7e1a2b3c4d5e6f0b6f1c1e5d5e4c6a9d7e1a2b3c4d5e6f"
)

// minCPU is the cpu rewriteServers raises a server's cpu to when it asks for less, in its
// requests and its limits alike, as a platform that sells no less does.
const minCPU = "250m"

// pinned is image as rewriteServers rewrites it.
func pinned(image string) string { return mirror + "/" + image + "@" + pinnedDigest }

// rewriteServers has admission rewrite the server container of every pod created in ns
// (mutatePods): its image pulled from a mirror and pinned to a digest, as a mirror policy and
// Kyverno's verifyImages with mutateDigest do, and its cpu raised to minCPU where its limit
// is less, as GKE Autopilot rounds it up. It returns once it does.
func rewriteServers(t *testing.T, ns string) {
	t.Helper()
	image := fmt.Sprintf(`"%s/" + c.image + "@%s"`, mirror, pinnedDigest)
	mutatePods(t, ns, "made-for", fmt.Sprintf(`  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{containers: object.spec.containers.filter(c, c.name == "server").map(c,
          has(c.resources) && has(c.resources.limits) && "cpu" in c.resources.limits &&
          quantity(c.resources.limits["cpu"]).isLessThan(quantity(%[2]q))
          ? Object.spec.containers{name: c.name, image: %[1]s,
              resources: Object.spec.containers.resources{requests: {"cpu": %[2]q}, limits: {"cpu": %[2]q}}}
          : Object.spec.containers{name: c.name, image: %[1]s})}}
`, image, minCPU), "{.spec.containers[0].image}", pinned("img:1"))
}

// madeForServer is the server pod of vm in ns, for madeForPod: its image, its cpu limit and
// request, and the image and resources it was made for.
func madeForServer(ns, vm string) string {
	return field(ns, "pod/"+vm+"-server", `.spec.containers[0].image}|{.spec.containers[0].resources.limits.cpu}|`+
		`{.spec.containers[0].resources.requests.cpu}|{.metadata.annotations.cloudnative\.czs/image}|`+
		`{.metadata.annotations.cloudnative\.czs/resources`)
}

// madeForPod is madeForServer's reading of a pod made for image, cpu 100m and memory 64Mi,
// as rewriteServers rewrites it.
func madeForPod(image string) string {
	return strings.Join([]string{pinned(image), minCPU, minCPU, image, "cpu=100m,memory=64Mi"}, "|")
}

// TestAdmissionRewritesServer: every server pod of the namespace is rewritten at its create
// (rewriteServers). The VM's server runs as admission made it, and the controller keeps it:
// across a barrier it is the one pod the VM ever had, its spec unchanged since its create
// (generation 1: no resize), with no Event of a replacement or a resize. Before the
// annotations, the controller read the pod's image and cpu back, found them differing from
// the VM's, and replaced the server at once, over and over, each new one rewritten the same
// way. A real change of the VM's image still replaces the server, once, and the Event names
// the image it was made for, not the digest.
func TestAdmissionRewritesServer(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	rewriteServers(t, ns)
	c := startController(t, ns, "--workers", "1")
	const vm, pod = "pinned", "pinned-server"
	statusVM(t, ns, vm, "100m", "example.org/vm:1")
	waitPhase(t, ns, vm, "Active", "ServerReady", 2*time.Minute)
	first := podUID(t, ns, vm)
	w := watchPod(t, ns, pod, first)
	if got, want := madeForServer(ns, vm), madeForPod("example.org/vm:1"); got != want {
		t.Fatalf("server pod (image|cpu limit|cpu request|made for image|made for resources) %q, want %q: as admission rewrote it, with what it was made for", got, want)
	}

	eventBarrier(t, c) // every reconcile the server's start caused is done, its Events stored
	uids, now, deleting := w.mark(t)
	if !slices.Equal(uids, []string{first}) || deleting {
		t.Fatalf("the VM's pods were %v, the last (%s) being deleted: %v; want %s alone, kept: the rewritten server was replaced", uids, now, deleting, first)
	}
	if got := field(ns, "pod/"+pod, ".metadata.generation}|{.spec.containers[0].resources.limits.cpu"); got != "1|"+minCPU {
		t.Errorf("server pod generation|cpu limit %q, want 1|%s: resized away from what admission gave it", got, minCPU)
	}
	if got := condition(ns, vm, "Resizing") + condition(ns, vm, "RestartRequired"); got != "" {
		t.Errorf("conditions Resizing, RestartRequired %q, want none: the server is the one the VM asks for", got)
	}
	for _, reason := range []string{"ReplacingServer", "ServerReplacing", "ResizingServer", "ServerResized"} {
		if n, notes := occurrences(t, ns, vm, reason); n != 0 {
			t.Errorf("%d %s Events, want none:\n%s", n, reason, notes)
		}
	}
	if n, notes := occurrences(t, ns, vm, "CreatingServer"); n != 1 {
		t.Errorf("%d CreatingServer Events, want 1:\n%s", n, notes)
	}

	// A real change of the image: one new server, made for it and rewritten as the first.
	kubectl(t, "-n", ns, "patch", vmRes, vm, "--type=merge", "-p", `{"spec":{"image":"example.org/vm:2"}}`)
	second := newServer(t, ns, vm, first)
	waitPhase(t, ns, vm, "Active", "ServerReady", 2*time.Minute)
	if got, want := madeForServer(ns, vm), madeForPod("example.org/vm:2"); got != want {
		t.Errorf("the new server pod (image|cpu limit|cpu request|made for image|made for resources) %q, want %q", got, want)
	}
	c.barrier(t)
	uids, now, deleting = w.mark(t)
	if !slices.Equal(uids, []string{first, second}) || deleting {
		t.Errorf("the VM's pods were %v, the last (%s) being deleted: %v; want %s, then %s alone, kept: the server replaced once", uids, now, deleting, first, second)
	}
	// Events are posted in the background: the wait is for the replacement's.
	replacing := "Replacing server " + pod + ": image example.org/vm:1 -> example.org/vm:2"
	eventually(t, 2*time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, vm, "ReplacingServer")
		return n == 1 && strings.HasPrefix(notes, replacing), fmt.Sprintf("%d ReplacingServer Events, want 1 beginning %q:\n%s", n, replacing, notes)
	})
	if n, notes := occurrences(t, ns, vm, "CreatingServer"); n != 2 {
		t.Errorf("%d CreatingServer Events, want 2 (the first server and its replacement):\n%s", n, notes)
	}
}
