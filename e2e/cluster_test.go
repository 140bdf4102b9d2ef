//go:build e2e

// Package e2e tests vm-controller against the real local control plane that
// cluster/cluster.sh starts (etcd, kube-apiserver, controller manager, scheduler, kwok nodes).
//
// Tests talk to the cluster through the kubectl binary, as a user and the docs do, so they
// exercise the same paths (discovery, apply, RBAC, admission) and need no client library.
// They never skip: without a cluster they fail at once with the command that starts one.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// kubectlTimeout bounds every kubectl call, so a stuck apiserver fails a test instead of
// hanging it until go test's global timeout. It stops a hung call; it is not a measure of
// speed, so it is long enough for a loaded machine and longer than any --timeout the tests
// give kubectl (3m).
const kubectlTimeout = 5 * time.Minute

var (
	// kubeconfig is the kubeconfig every kubectl call uses: $KUBECONFIG, else the one
	// `make cluster` writes.
	kubeconfig string
	// kubectlBin is the kubectl the tests run: the one `make tools` built (same version as
	// the server), else the first on PATH.
	kubectlBin string
)

// TestMain finds the cluster and fails the whole package with one clear line when there is
// none, rather than letting every test time out on its own. The e2e tests never skip: a
// missing cluster is a failure of `go test -tags e2e`, which only `make test` (which starts
// one) or a developer with a running cluster should run.
func TestMain(m *testing.M) {
	root := repoRoot()
	kubeconfig = os.Getenv("KUBECONFIG")
	source := "$KUBECONFIG"
	if kubeconfig == "" {
		kubeconfig = filepath.Join(root, ".cache", "kubeconfig")
		source = "KUBECONFIG is unset; the default"
		// The controllers and commands the tests start find the cluster the same way as
		// kubectl, without a --kubeconfig of their own.
		if err := os.Setenv("KUBECONFIG", kubeconfig); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: FAIL: set KUBECONFIG: %v\n", err)
			os.Exit(1)
		}
	}
	noCluster := func(why string) {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: no cluster at %s (%s): %s; start one with `make cluster` or run `make test`\n", kubeconfig, source, why)
		os.Exit(1)
	}
	if !anyExists(filepath.SplitList(kubeconfig)) {
		noCluster("no such file") // no kubeconfig at all: no point in waiting
	}
	kubectlBin = filepath.Join(root, ".cache", "bin", "kubectl")
	if _, err := os.Stat(kubectlBin); err != nil {
		path, err := exec.LookPath("kubectl")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: FAIL: no kubectl in .cache/bin or PATH: build it with `make tools` or run `make test`")
			os.Exit(1)
		}
		kubectlBin = path
	}
	// A cluster that was just started may need a few seconds before /readyz says ok; one that
	// is not there fails after this wait.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := kubectlErr("get", "--raw", "/readyz", "--request-timeout=5s")
		if err == nil && out == "ok" {
			break
		}
		if time.Now().After(deadline) {
			why := fmt.Sprintf("/readyz answered %q", out)
			if err != nil {
				why = lastLines(err.Error(), 1)
			}
			noCluster(why)
		}
		time.Sleep(time.Second)
	}
	os.Exit(m.Run())
}

// anyExists tells whether any of the files exists; KUBECONFIG may list several.
func anyExists(paths []string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// repoRoot returns the repository's root (the directory holding the main module's go.mod),
// so tests can use crds/ and testdata/ whatever directory go test runs them from.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			panic("e2e: no go.mod above " + dir)
		}
	}
}

// runKubectl runs kubectl with stdin and returns stdout and stderr separately, because
// callers check output for values and stderr for warnings.
func runKubectl(stdin string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", kubectlTimeout, ctx.Err())
	}
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), errOut.String(), err
}

// kubectlErr runs kubectl and returns its trimmed stdout; the error carries stderr. For
// calls whose failure is an expected outcome (NotFound after a delete, polling).
func kubectlErr(args ...string) (string, error) {
	out, _, err := runKubectl("", args...)
	return out, err
}

// kubectl runs kubectl and fails the test, with kubectl's stderr, if it fails; for calls
// that must work.
func kubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, _, err := runKubectl("", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// apply applies a YAML manifest given inline, so a test reads as the objects it creates.
func apply(t testing.TB, yaml string) string {
	t.Helper()
	out, _, err := runKubectl(yaml, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("%v\nmanifest:\n%s", err, yaml)
	}
	return out
}

// eventually polls cond until it reports true or timeout passes. cond also returns what it
// saw, so that a failure says what the cluster looked like last, not just "timed out".
func eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s; last observation: %s", timeout, seen)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitEstablished waits until the CRD named crd is Established. Not kubectl wait
// --for=condition=Established: on a CRD just created, whose status has no conditions yet,
// kubectl fails at once ("accessor error: <nil> is of the type <nil>") instead of waiting.
func waitEstablished(t testing.TB, crd string) {
	t.Helper()
	eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := kubectlErr("get", "crd", crd, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		return err == nil && out == "True", fmt.Sprintf("crd/%s Established %q (%v)", crd, out, err)
	})
}

var notNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// testNamespace creates a namespace for this test alone and deletes it when the test ends,
// so tests can run in parallel and a rerun on the same cluster starts clean. The name holds
// the test's name (to find it in the cluster) and a random suffix (to never collide).
func testNamespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	ns := "e2e-" + base + "-" + hex.EncodeToString(suffix)
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() {
		// Not waiting: the namespace controller finishes the deletion in the background,
		// and the next test needs nothing from it.
		if _, err := kubectlErr("delete", "namespace", ns, "--wait=false", "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		releaseFinalizers(ns, "virtualmachines.cloudnative.czs")
	})
	return ns
}

// releaseFinalizers removes the finalizers of every object of resource in ns. A test's
// controller has stopped by its cleanup, so nothing else removes the controller's finalizer:
// without this, the namespace (or the CRD) would stay Terminating on a cluster that outlives
// the run. The objects' pods go with them, by owner reference.
func releaseFinalizers(ns, resource string) {
	out, _ := kubectlErr("-n", ns, "get", resource, "-o", "name")
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for _, obj := range strings.Fields(out) {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			_, _ = kubectlErr("-n", ns, "patch", obj, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		})
	}
	wg.Wait()
}

// isNotFound tells whether a kubectl error is the apiserver's NotFound, which after a
// delete is the expected answer and not a failure.
func isNotFound(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "NotFound") || strings.Contains(err.Error(), "not found"))
}

// applyCRD applies the CRD of testdata/crds/file, named res, waits until it is Established,
// and on cleanup releases the finalizers of its objects in ns and deletes it.
func applyCRD(t *testing.T, ns, file, res string) {
	t.Helper()
	kubectl(t, "apply", "-f", filepath.Join(repoRoot(), "testdata", "crds", file))
	t.Cleanup(func() {
		releaseFinalizers(ns, res)
		if _, err := kubectlErr("delete", "crd", res, "--wait=false", "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	waitEstablished(t, res)
}
