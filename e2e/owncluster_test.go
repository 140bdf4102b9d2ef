//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Clusters of a test's own, for the tests that disturb the control plane (chaos_test.go):
// one is started like the shared cluster (cluster/cluster.sh, from the binaries in
// .cache/bin) but with its own state, ports and kubeconfig, and deleted when the test ends.
// kube reaches either kind of cluster through kubectl, and cutProxy stands between the
// controller and an API server to cut it off.

// kube is one cluster, reached through kubectl with its kubeconfig.
type kube struct{ kubeconfig string }

// sharedKube is the cluster every other test uses.
func sharedKube() kube { return kube{kubeconfig} }

// run runs kubectl on the cluster with stdin.
func (k kube) run(stdin string, args ...string) (stdout, stderr string, err error) {
	return runKubectl(stdin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
}

// try runs kubectl on the cluster; for calls whose failure is an expected outcome.
func (k kube) try(args ...string) (string, error) {
	out, _, err := k.run("", args...)
	return out, err
}

// must runs kubectl on the cluster and fails the test if it fails.
func (k kube) must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := k.try(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// namespace creates a namespace on the cluster for this test alone (on the shared cluster,
// testNamespace; a cluster of a test's own goes away with the test) and waits for its
// default ServiceAccount.
func (k kube) namespace(t *testing.T) string {
	t.Helper()
	var ns string
	if k.kubeconfig == kubeconfig {
		ns = testNamespace(t)
	} else {
		ns = "e2e-" + randomSuffix(t)
		k.must(t, "create", "namespace", ns)
	}
	k.waitDefaultServiceAccount(t, ns)
	return ns
}

// waitDefaultServiceAccount waits for the namespace's default ServiceAccount, without which
// the API server refuses pods there; otherwise the first server pods of a fresh namespace
// would be refused for a moment, and the controller's retries blur what a test looks at.
func (k kube) waitDefaultServiceAccount(t *testing.T, ns string) {
	t.Helper()
	eventually(t, 3*time.Minute, func() (bool, string) {
		_, err := k.try("-n", ns, "get", "serviceaccount", "default")
		return err == nil, fmt.Sprintf("no default ServiceAccount in %s: %v", ns, err)
	})
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ownCluster is a kwok cluster a test starts for itself, like the shared one (cluster.sh:
// the binaries of .cache/bin, loopback only, fake nodes with ephemeral storage) but with its
// own state directory, ports and kubeconfig, and deleted when the test ends.
type ownCluster struct {
	kube
	name string
	dir  string // its KWOK_WORKDIR
	bin  string // .cache/bin
}

// creating serialises the creation of clusters (see newCluster).
var creating sync.Mutex

// newCluster starts a cluster with nodes fake nodes and the project's CRD; extra are more
// `kwokctl create cluster` flags (--extra-args for a component, say).
func newCluster(t *testing.T, nodes int, extra ...string) *ownCluster {
	t.Helper()
	bin := filepath.Join(repoRoot(), ".cache", "bin")
	for _, b := range []string{"kwokctl", "kwok", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%s is missing: build the tools with `make tools` (or run `make test`)", filepath.Join(bin, b))
		}
	}
	dir, err := os.MkdirTemp("", "vmc-e2e-kwok-")
	if err != nil {
		t.Fatal(err)
	}
	c := &ownCluster{kube: kube{filepath.Join(dir, "kubeconfig")}, name: "e2e-" + randomSuffix(t), dir: dir, bin: bin}
	t.Cleanup(func() { c.delete(t) })
	start := time.Now()
	args := []string{"create", "cluster", "--runtime", "binary", "--kubeconfig", "",
		"--config", filepath.Join(repoRoot(), "cluster", "kwokctl.yaml"),
		"--etcd-binary", filepath.Join(bin, "etcd"),
		"--kube-apiserver-binary", filepath.Join(bin, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(bin, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(bin, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(bin, "kwok"),
		"--kube-authorization=true", "--kube-admission=true", "--timeout", "120s"}
	// kwokctl picks free ports when it creates a cluster, and they are taken only once the
	// cluster runs: two creations at once could pick the same ones.
	func() {
		creating.Lock()
		defer creating.Unlock()
		c.kwokctl(t, 150*time.Second, append(args, extra...)...)
		if err := os.WriteFile(c.kubeconfig, []byte(c.kwokctl(t, 30*time.Second, "get", "kubeconfig")), 0o600); err != nil {
			t.Fatal(err)
		}
		c.waitReady(t)
	}()
	// kwok's node template advertises no ephemeral-storage, which every server pod requests.
	ready := func() (bool, string) {
		out, _ := c.try("get", "nodes", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		return strings.Count(out, "True") == nodes, "node readiness: " + strings.Join(strings.Fields(out), " ")
	}
	// On a loaded machine the first scale can leave no node (seen once in CI); scaling is
	// idempotent, so it is asked for again before the wait gives up.
	for try := 1; ; try++ {
		c.kwokctl(t, 60*time.Second, "scale", "node", "--replicas", strconv.Itoa(nodes), "--param", `.allocatable["ephemeral-storage"] = "10Ti"`)
		deadline := time.Now().Add(90 * time.Second)
		ok := false
		for !ok && time.Now().Before(deadline) {
			if ok, _ = ready(); !ok {
				time.Sleep(500 * time.Millisecond)
			}
		}
		if ok {
			break
		}
		if try == 3 {
			_, seen := ready()
			t.Fatalf("cluster %s: nodes not ready after %d scales; last observation: %s", c.name, try, seen)
		}
	}
	c.must(t, "apply", "-f", filepath.Join(repoRoot(), "crds"))
	// The StorageClasses claims are provisioned with, as cluster.sh up applies them: each VM's
	// disk is a claim (run's --root-disk claim).
	c.must(t, "apply", "-f", filepath.Join(repoRoot(), "cluster", "storage.yaml"))
	// Not kubectl wait, which fails on a CRD whose status has no conditions yet (waitEstablished).
	eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := c.try("get", "crd", "virtualmachines.cloudnative.czs", "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		return err == nil && out == "True", fmt.Sprintf("Established %q (%v)", out, err)
	})
	t.Logf("cluster %s up with %d nodes in %s", c.name, nodes, time.Since(start).Round(100*time.Millisecond))
	return c
}

// kwokctl runs kwokctl on this cluster and returns its output.
func (c *ownCluster) kwokctl(t testing.TB, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kwokctl"), append([]string{"--name", c.name}, args...)...)
	// kwokctl runs kubectl itself: ours, so that nothing is downloaded.
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.dir, "KWOK_KUBECTL_BINARY="+filepath.Join(c.bin, "kubectl"),
		"PATH="+c.bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kwokctl %s: %v\n%s", strings.Join(args, " "), err, lastLines(errOut.String(), 10))
	}
	return out.String()
}

// waitReady waits until the API server answers /readyz.
func (c *ownCluster) waitReady(t testing.TB) {
	t.Helper()
	eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := c.try("get", "--raw", "/readyz", "--request-timeout=5s")
		return err == nil && out == "ok", fmt.Sprintf("/readyz: %q %v", out, err)
	})
}

// delete removes the cluster and its state; if the test failed, it first shows the end of
// the API server's log.
func (c *ownCluster) delete(t *testing.T) {
	if t.Failed() {
		if data, err := os.ReadFile(c.componentLog("kube-apiserver")); err == nil {
			t.Logf("kube-apiserver log of cluster %s (last 20 lines):\n%s", c.name, lastLines(string(data), 20))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A kubeconfig path that does not exist: delete edits nothing.
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kwokctl"), "--name", c.name, "delete", "cluster", "--kubeconfig", filepath.Join(c.dir, "none"))
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.dir, "KWOK_KUBECTL_BINARY="+filepath.Join(c.bin, "kubectl"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("delete cluster %s: %v\n%s", c.name, err, lastLines(string(out), 10))
		return // keep its state for a look
	}
	if err := os.RemoveAll(c.dir); err != nil {
		t.Errorf("remove %s: %v", c.dir, err)
	}
}

// componentLog is the log file of one of the cluster's components.
func (c *ownCluster) componentLog(component string) string {
	return filepath.Join(c.dir, "clusters", c.name, "logs", component+".log")
}

// apiServerAddr is host:port of the cluster's API server, from its kubeconfig.
func (c *ownCluster) apiServerAddr(t testing.TB) string {
	t.Helper()
	server := c.must(t, "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
	return strings.TrimPrefix(server, "https://")
}

// restartAPIServer kills the API server with SIGKILL, as a crash would, leaves it down for
// down, and starts it again with kwokctl (which starts the components that are not running).
func (c *ownCluster) restartAPIServer(t *testing.T, down time.Duration) {
	t.Helper()
	pidFile := filepath.Join(c.dir, "clusters", c.name, "pids", "kube-apiserver.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("%s: %v", pidFile, err)
	}
	// While it is down its port is free, and a cluster another test creates meanwhile could
	// pick it (kwokctl picks free ports): seen once, the restart then failed with "address
	// already in use". Creations wait until it listens again.
	creating.Lock()
	defer creating.Unlock()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the API server (pid %d): %v", pid, err)
	}
	// kwokctl starts only what does not run, so the old process must be gone first.
	eventually(t, 3*time.Minute, func() (bool, string) { return !running(pid), fmt.Sprintf("API server pid %d still there", pid) })
	time.Sleep(down)
	c.kwokctl(t, 150*time.Second, "start", "cluster")
	c.waitReady(t)
}

// running tells whether a process exists and has not exited (a zombie has).
func running(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// kubeconfigVia writes a copy of the cluster's kubeconfig that reaches the API server
// through addr (a proxy on the loopback interface, which the server's certificate covers).
func (c *ownCluster) kubeconfigVia(t *testing.T, addr string) string {
	t.Helper()
	data, err := os.ReadFile(c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	server := regexp.MustCompile(`(?m)^(\s*server:\s*)https://\S+$`)
	if !server.Match(data) {
		t.Fatalf("no server in %s", c.kubeconfig)
	}
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, server.ReplaceAll(data, []byte("${1}https://"+addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// cutProxy forwards TCP connections to target. cut drops every connection and closes the
// port, so that clients see their streams end and then "connection refused", as from an API
// server that is down; restore opens the port again.
type cutProxy struct {
	target, addr string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(conn)
		}
	}()
}

func (p *cutProxy) forward(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialling
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[client], p.conns[server] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	client.Close()
	server.Close()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// cut closes the port and every connection through it.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// restore opens the port again.
func (p *cutProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("reopen the proxy's port %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
