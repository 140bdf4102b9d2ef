package command

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestStatusWhere: status gives the server's node and IP from its pod where the pod can be
// read, and otherwise those the VM's status reports (status.server.node and .ip, as kubectl
// get vm -o wide shows them), with one line saying why the pod was not read: a user who may
// not read pods sees where the VM runs, and why the pod says nothing.
func TestStatusWhere(t *testing.T) {
	server := map[string]any{"name": "vm1-server", "id": "u", "state": "Running", "node": "node-b", "ip": "10.0.0.9"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vm1-server", Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: "node-a"}, Status: corev1.PodStatus{PodIP: "10.0.0.7"}}
	forbidden := func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(k8sschema.GroupResource{Resource: "pods"}, "vm1-server",
			errors.New(`User "dev" cannot get resource "pods" in API group "" in the namespace "ns"`))
	}
	tests := map[string]struct {
		server    map[string]any
		pod       *corev1.Pod
		react     k8stesting.ReactionFunc // on the pod's read; nil: the fake's own
		node, ip  string
		podLine   string // "": no line Pod
		noPodLine bool
	}{
		"the pod read": {server: server, pod: pod, node: "node-a", ip: "10.0.0.7", noPodLine: true},
		"pods forbidden": {server: server, react: forbidden, node: "node-b", ip: "10.0.0.9",
			podLine: `cannot read the server pod vm1-server: forbidden (pods "vm1-server" is forbidden: User "dev" cannot get resource "pods"`},
		"the pod gone": {server: server, node: "node-b", ip: "10.0.0.9",
			podLine: `the server pod vm1-server not found in namespace "ns"`},
		"pods forbidden, no node in the status": {server: map[string]any{"name": "vm1-server", "id": "u", "state": "Pending"}, react: forbidden,
			node: "<none>", ip: "<none>", podLine: "cannot read the server pod vm1-server: forbidden"},
		"the pod not scheduled yet": {server: server, pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vm1-server", Namespace: "ns"}},
			node: "node-b", ip: "10.0.0.9", noPodLine: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v, _, out := waitClient(t, nil, map[string]any{"phase": "Active", "reason": "ServerReady", "server": tc.server}, nil, nil)
			var objects []runtime.Object
			if tc.pod != nil {
				objects = append(objects, tc.pod)
			}
			kube := kubefake.NewClientset(objects...)
			if tc.react != nil {
				kube.PrependReactor("get", "pods", tc.react)
			}
			v.kube = kube
			if err := v.status(context.Background(), "vm1"); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			for _, want := range []string{"Node:          " + tc.node + "\n", "IP:            " + tc.ip + "\n"} {
				if !strings.Contains(got, want) {
					t.Errorf("status:\n%s\nwant %q", got, want)
				}
			}
			pod := ""
			for _, l := range strings.Split(got, "\n") {
				if strings.HasPrefix(l, "Pod:") {
					pod = l
				}
			}
			switch {
			case tc.noPodLine && pod != "":
				t.Errorf("status:\n%s\nwant no line Pod", got)
			case tc.podLine != "" && (!strings.Contains(pod, tc.podLine) || !strings.HasSuffix(pod, "; node and IP as the VM's status reports them")):
				t.Errorf("status:\n%s\nwant a line Pod saying %q, and where the node and IP come from", got, tc.podLine)
			}
		})
	}
}

// closedPort is an address on this machine where nothing listens: a connection to it is
// refused.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// unreachableKubeconfig is a kubeconfig whose cluster is at closedPort: every request is
// refused its connection.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, closedPort(t))
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// TestVerbsUnreachable: every verb against a cluster it cannot reach (nothing listens: its
// first read of the VM is refused its connection) ends at once, exit 1, with one line saying
// so, the same for all: not the HTTP client's "read virtualmachine ...: Get ...", and, of
// wait, not a wait of its whole timeout that then reports, as "last seen", a VM it never saw.
func TestVerbsUnreachable(t *testing.T) {
	kubeconfig := unreachableKubeconfig(t)
	for _, args := range [][]string{
		{"status", "vm1"},
		{"start", "vm1"},
		{"stop", "vm1"},
		{"stop", "vm1", "--force"},
		{"restart", "vm1"},
		{"migrate", "vm1"},
		{"wait", "vm1", "--for", "phase=Active", "--timeout", "10s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			app := Plugin("test")
			var out bytes.Buffer
			app.Writer, app.ErrWriter = &out, &out
			start := time.Now()
			err := app.Run(PluginArgs(append([]string{PluginName}, append(args, "--kubeconfig", kubeconfig)...)))
			took := time.Since(start)
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.HasPrefix(err.Error(), "cannot reach the cluster: Get ") ||
				!strings.HasSuffix(err.Error(), "connect: connection refused") || strings.Contains(err.Error(), "last seen") ||
				strings.Contains(err.Error(), "\n") || out.Len() != 0 {
				t.Errorf("%v, output %q; want exit 1, one line saying it cannot reach the cluster", err, out.String())
			}
			if took > 3*time.Second {
				t.Errorf("took %s to give up on a cluster that refuses the connection, want it at once", took)
			}
		})
	}
}

// refusedConnection is the error of a request that did not reach the API server, as client-go
// returns it through the plugin's transport: a connection asked for, and nothing sent.
func refusedConnection() error {
	return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/apis/cloudnative.czs/v1alpha1/namespaces/ns/virtualmachines",
		Err: &requestError{connecting: true, err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6443},
			Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}}
}

// TestWaitAcrossABlip: once wait has read the VM, the cluster was there; a read that does not
// reach it afterwards (an API server restarting) is made again after the backoff, and the wait
// goes on. A read the API server answers with an error (a 500, a 429: it is there) is made
// again too, also at the first read; a wait that never read the VM does not say it saw it.
func TestWaitAcrossABlip(t *testing.T) {
	t.Run("connection refused after the VM was read", func(t *testing.T) {
		var mu sync.Mutex
		lists := 0
		list := func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetVerb() != "list" {
				return false, nil, nil
			}
			mu.Lock()
			defer mu.Unlock()
			lists++
			if lists == 2 || lists == 3 {
				return true, nil, refusedConnection()
			}
			return false, nil, nil
		}
		// The first watch fails as the API server goes: wait lists again, which is refused
		// twice, then answered.
		watches := 0
		watchReact := func(k8stesting.Action) (bool, watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			watches++
			if watches == 1 {
				w := watch.NewRaceFreeFake()
				w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
				w.Stop()
				return true, w, nil
			}
			return false, nil, nil
		}
		v, dyn, _ := waitClient(t, nil, map[string]any{"phase": "Creating", "observedGeneration": int64(1)}, list, watchReact)
		go statusLater(dyn, v.gvr, map[string]any{"phase": "Active", "reason": "ServerReady", "observedGeneration": int64(1)}, 600*time.Millisecond)
		w, _ := parseFor("phase=Active")
		if err := v.wait(context.Background(), "vm1", w, "phase=Active", 5*time.Second, waitReachGrace); err != nil {
			t.Fatalf("wait: %v, want the condition met once the API server is back", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if lists < 3 {
			t.Errorf("%d lists, want the refused ones made again", lists)
		}
	})
	t.Run("the API server answers 500 at the first read", func(t *testing.T) {
		list := func(a k8stesting.Action) (bool, runtime.Object, error) {
			return a.GetVerb() == "list", nil, apierrors.NewInternalError(errors.New("etcd is away"))
		}
		v, dyn, _ := waitClient(t, nil, map[string]any{"phase": "Creating", "observedGeneration": int64(1)}, list, nil)
		w, _ := parseFor("phase=Active")
		err := v.wait(context.Background(), "vm1", w, "phase=Active", 500*time.Millisecond, waitReachGrace)
		const want = "timed out after 500ms waiting for phase=Active of virtualmachine/vm1, which it never read " +
			"(last error: read virtualmachine vm1 in namespace ns: Internal error occurred: etcd is away)"
		var ec cli.ExitCoder
		if !errors.As(err, &ec) || ec.ExitCode() != 1 || err.Error() != want {
			t.Errorf("wait: %v, want exit 1 saying %q", err, want)
		}
		if lists := len(dyn.Actions()); lists < 2 {
			t.Errorf("%d lists, want the first made again", lists)
		}
	})
}

// fadingAPIServer is an API server of one v1alpha1 VM, vm1 in namespace default, and its
// server's pod, that answers until the request drop names: that one it reads and leaves
// without an answer, and it goes (it drops every connection and, as how says, every
// connection after is refused, closed at once or left without an answer). A watch it answers
// stays open, without events, until it goes; a watch it goes at is first opened (its headers
// sent), as a watch the API server drops when it stops.
type fadingAPIServer struct {
	*httptest.Server
	status map[string]any // the VM's status
	action string         // the VM's spec.action
	// drop reports whether the API server goes at a request of kind ("get", "list", "watch",
	// "patch", "pod") that is the nth of its kind.
	drop func(kind string, n int) bool
	// expire, when set, answers the first watch with a 410 Gone error event and ends it, as
	// the API server does for a watch that fell behind: wait lists again.
	expire bool
	// how it is gone: refuses (""; it stops listening: every connection after is refused),
	// closes (a load balancer before an API server that is gone: it takes each connection and
	// closes it at once, without an answer) or hangs (it takes each connection and never
	// answers: an API server that is stuck, or an address that does not answer).
	how string

	mu    sync.Mutex
	count map[string]int
	gone  bool
}

func newFadingAPIServer(t *testing.T, action string, status map[string]any, drop func(kind string, n int) bool) *fadingAPIServer {
	t.Helper()
	s := &fadingAPIServer{action: action, status: status, drop: drop, count: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// kubeconfig is a kubeconfig of the server, namespace default.
func (s *fadingAPIServer) kubeconfig(t *testing.T) string {
	return (&fakeAPIServer{Server: s.Server}).kubeconfig(t)
}

func (s *fadingAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	const vms = "/apis/cloudnative.czs/v1alpha1/namespaces/default/virtualmachines"
	kind := ""
	switch {
	case r.URL.Path == vms+"/vm1" && r.Method == http.MethodGet:
		kind = "get"
	case r.URL.Path == vms+"/vm1" && r.Method == http.MethodPatch:
		kind = "patch"
	case r.URL.Path == vms && r.URL.Query().Get("watch") == "true":
		kind = "watch"
	case r.URL.Path == vms:
		kind = "list"
	case r.URL.Path == "/api/v1/namespaces/default/pods/vm1-server":
		kind = "pod"
	default:
		notFound(w, k8sschema.GroupResource{Resource: r.URL.Path}, "")
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.count[kind]++
	n := s.count[kind]
	gone := s.gone
	s.mu.Unlock()
	switch {
	case gone && s.how == "closes":
		s.closeConn(w)
		return
	case gone && s.how == "hangs":
		<-r.Context().Done()
		return
	}
	goes := s.drop(kind, n)
	vm, _ := json.Marshal(map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm1", "namespace": "default", "resourceVersion": "7", "generation": 1},
		"spec":     map[string]any{"action": s.action, "resource": map[string]any{"cpu": 1, "memory": "1Gi", "rootDisk": "1Gi"}},
		"status":   s.status})
	w.Header().Set("Content-Type", "application/json")
	switch {
	case kind == "watch" && goes:
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(100 * time.Millisecond)
		s.goes(w)
	case goes:
		s.goes(w)
	case kind == "watch" && s.expire && n == 1:
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410}}`)
	case kind == "watch":
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case kind == "list":
		fmt.Fprintf(w, `{"kind":"VirtualMachineList","apiVersion":"cloudnative.czs/v1alpha1","metadata":{"resourceVersion":"9"},"items":[%s]}`, vm)
	case kind == "pod":
		fmt.Fprint(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"vm1-server","namespace":"default"},"spec":{"nodeName":"node-a"},"status":{"podIP":"10.0.0.7"}}`)
	default:
		_, _ = w.Write(vm)
	}
}

// goes drops every connection, the one of w's request first, without an answer, and stops
// listening (how "": refuses), or goes on taking connections, to close them or leave them
// without an answer.
func (s *fadingAPIServer) goes(w http.ResponseWriter) {
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
	if s.how == "" {
		s.Listener.Close()
	}
	s.closeConn(w)
	s.CloseClientConnections()
}

// closeConn closes the connection of w's request without an answer.
func (s *fadingAPIServer) closeConn(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

// TestVerbsUnreachableMidway: a cluster that stops answering after a verb's first read (the
// read of the VM answered) ends the verb as one that never answered does (TestVerbsUnreachable):
// exit 1, one line "cannot reach the cluster: ...", nothing printed. Not the HTTP client's error
// behind "write virtualmachine vm1: Patch ..." (start, stop, restart), "read the server pod
// ..." (migrate), a line Pod: and exit 0 (status), nor, of wait, a wait of its whole --timeout
// that then reports "timed out": wait goes on across such a failure until no request has had
// an answer for --unreachable-timeout (its default, waitReachGrace, 300ms here), however the
// cluster is gone: connections refused, closed at once, or left without an answer. A write
// whose connection went after it was sent may have been made, and the line says so.
func TestVerbsUnreachableMidway(t *testing.T) {
	defer func(g time.Duration) { waitReachGrace = g }(waitReachGrace)
	waitReachGrace = 300 * time.Millisecond
	running := map[string]any{"phase": "Active", "reason": "ServerReady", "observedGeneration": 1,
		"server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running", "node": "node-a"}}
	at := func(kind string, nth int) func(string, int) bool {
		return func(k string, n int) bool { return k == kind && n == nth }
	}
	const mayHaveBeenMade = " (the write may have been made all the same: look at the VM before running the verb again)"
	const lastSeen = " (for 300ms while waiting for phase=Inactive of virtualmachine/vm1; last seen: phase Active (ServerReady))"
	tests := map[string]struct {
		args   []string
		action string
		status map[string]any
		drop   func(string, int) bool
		expire bool
		how    string // fadingAPIServer's
		prefix string // of the error, after "cannot reach the cluster: "
		suffix string
	}{
		"start's write": {args: []string{"start", "vm1"}, action: "inactive", status: map[string]any{"phase": "Inactive", "observedGeneration": 1},
			drop: at("patch", 1), prefix: `Patch "http://`, suffix: ": EOF" + mayHaveBeenMade},
		"stop's write": {args: []string{"stop", "vm1"}, action: "active", status: running,
			drop: at("patch", 1), prefix: `Patch "http://`, suffix: ": EOF" + mayHaveBeenMade},
		"stop --force's write": {args: []string{"stop", "vm1", "--force"}, action: "active", status: running,
			drop: at("patch", 1), prefix: `Patch "http://`, suffix: ": EOF" + mayHaveBeenMade},
		"restart's write": {args: []string{"restart", "vm1"}, action: "active", status: running,
			drop: at("patch", 1), prefix: `Patch "http://`, suffix: ": EOF" + mayHaveBeenMade},
		"migrate's read of the pod": {args: []string{"migrate", "vm1"}, action: "active", status: running,
			drop: at("pod", 1), prefix: `Get "http://`, suffix: "connect: connection refused"},
		"status's read of the pod": {args: []string{"status", "vm1"}, action: "active", status: running,
			drop: at("pod", 1), prefix: `Get "http://`, suffix: "connect: connection refused"},
		"wait's watch": {args: []string{"wait", "vm1", "--for", "phase=Inactive", "--timeout", "8s"}, action: "active", status: running,
			drop: at("watch", 1), prefix: `Get "http://`,
			suffix: "connect: connection refused (for 300ms while waiting for phase=Inactive of virtualmachine/vm1; last seen: phase Active (ServerReady))"},
		"wait's list after the watch": {args: []string{"wait", "vm1", "--for", "phase=Inactive", "--timeout", "8s"}, action: "active", status: running,
			expire: true, drop: at("list", 2), prefix: `Get "http://`,
			suffix: "connect: connection refused (for 300ms while waiting for phase=Inactive of virtualmachine/vm1; last seen: phase Active (ServerReady))"},
		// client-go makes a watch that meets an EOF or a timeout again, up to 10 times a
		// second apart, and then returns an empty watch and no error; a list that meets an EOF
		// again too: neither is an answer of the API server.
		"wait's watch, each connection closed at once (a load balancer before an API server gone)": {
			args: []string{"wait", "vm1", "--for", "phase=Inactive", "--timeout", "8s"}, action: "active", status: running,
			drop: at("watch", 1), how: "closes", prefix: `Get "http://`, suffix: ": EOF" + lastSeen},
		"wait's list after the watch, each connection closed at once": {
			args: []string{"wait", "vm1", "--for", "phase=Inactive", "--timeout", "8s"}, action: "active", status: running,
			expire: true, drop: at("list", 2), how: "closes", prefix: `Get "http://`, suffix: ": EOF" + lastSeen},
		// A request without an answer (an API server stuck, an address where nothing answers,
		// a dial that takes its 30s to time out) ends wait at the same bound.
		"wait's watch, no answer": {args: []string{"wait", "vm1", "--for", "phase=Inactive", "--timeout", "8s"}, action: "active", status: running,
			drop: at("watch", 1), how: "hangs", prefix: "the API server gave no answer", suffix: "the API server gave no answer" + lastSeen},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := newFadingAPIServer(t, tc.action, tc.status, tc.drop)
			srv.expire, srv.how = tc.expire, tc.how
			app := Plugin("test")
			var out bytes.Buffer
			app.Writer, app.ErrWriter = &out, &out
			start := time.Now()
			err := app.Run(PluginArgs(append([]string{PluginName}, append(tc.args, "--kubeconfig", srv.kubeconfig(t))...)))
			took := time.Since(start)
			var ec cli.ExitCoder
			if err == nil || !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.HasPrefix(err.Error(), "cannot reach the cluster: "+tc.prefix) ||
				!strings.HasSuffix(err.Error(), tc.suffix) || strings.Contains(err.Error(), "\n") || out.Len() != 0 {
				t.Errorf("%v, output %q; want exit 1, one line %q...%q", err, out.String(), "cannot reach the cluster: "+tc.prefix, tc.suffix)
			}
			if took > 5*time.Second {
				t.Errorf("took %s to give up on a cluster that went, want it within a few seconds", took)
			}
		})
	}
}

// TestWriteRefusedItsConnection: a write whose connection is refused (a dial that failed)
// was not sent: "cannot reach the cluster: ..." without the note that it may have been made.
// An answer of the API server to the write (a 409, a 403, a 500) is not such a failure, and
// is said as before.
func TestWriteRefusedItsConnection(t *testing.T) {
	gr := k8sschema.GroupResource{Group: schema.Group, Resource: "virtualmachines"}
	tests := map[string]struct {
		err  error
		want string
		code int
	}{
		"refused": {err: &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/x", Err: refusedConnection().(*url.Error).Err},
			want: `cannot reach the cluster: Patch "https://127.0.0.1:6443/x": dial tcp 127.0.0.1:6443: connect: connection refused`, code: 1},
		"forbidden": {err: apierrors.NewForbidden(gr, "vm1", errors.New("no")),
			want: `cannot change virtualmachine "vm1" in namespace "ns": forbidden (virtualmachines.cloudnative.czs "vm1" is forbidden: no)`, code: 1},
		"internal error": {err: apierrors.NewInternalError(errors.New("etcd is away")),
			want: "write virtualmachine vm1: Internal error occurred: etcd is away"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v, _, _ := waitClient(t, nil, map[string]any{"phase": "Active", "reason": "ServerReady", "observedGeneration": int64(1)},
				func(a k8stesting.Action) (bool, runtime.Object, error) { return a.GetVerb() == "patch", nil, tc.err }, nil)
			v.now = func() time.Time { return pluginNow }
			_, err := v.verb(context.Background(), "vm1", restartVerb)
			var ec cli.ExitCoder
			if err == nil || err.Error() != tc.want || tc.code != 0 && (!errors.As(err, &ec) || ec.ExitCode() != tc.code) {
				t.Errorf("%v, want %q (exit %d)", err, tc.want, tc.code)
			}
		})
	}
}

// TestWaitEndsOnceTheClusterIsGone: a wait whose cluster goes during its watch ends on that
// watch's failure once the grace is past, at once: not after one more list, which it made when
// it took the end of the watch for a watch that ended (TestWatchEnd).
func TestWaitEndsOnceTheClusterIsGone(t *testing.T) {
	var mu sync.Mutex
	gone, lists := false, 0
	list := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() != "list" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		lists++
		if gone {
			return true, nil, refusedConnection()
		}
		return false, nil, nil
	}
	watchReact := func(k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		gone = true
		return true, nil, refusedConnection()
	}
	v, _, _ := waitClient(t, nil, map[string]any{"phase": "Creating", "reason": "ServerStarting", "observedGeneration": int64(1)}, list, watchReact)
	// Once the cluster is gone, an hour passes at each reading of the clock: the grace is
	// over at the first failure.
	at := pluginNow
	v.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if gone {
			at = at.Add(time.Hour)
		}
		return at
	}
	w, _ := parseFor("phase=Active")
	err := v.wait(context.Background(), "vm1", w, "phase=Active", 5*time.Second, waitReachGrace)
	const want = "connect: connection refused (for 1m0s while waiting for phase=Active of virtualmachine/vm1; last seen: phase Creating (ServerStarting))"
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.HasPrefix(err.Error(), "cannot reach the cluster: Get ") || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("%v, want exit 1, cannot reach the cluster, the watch's failure: ...%s", err, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if lists != 1 {
		t.Errorf("%d lists, want the one that read the VM: the watch's failure ends the wait", lists)
	}
}

// TestWatchEnd: a watch whose context ended ends on the context's cause, whichever of the
// watch-closed error and "context done" UntilWithoutRetry met first: the RetryWatcher closes
// its channel as the context ends, and the two race. Taken for a watch that ended, a cluster
// gone for the grace made wait go through one more backoff and list.
func TestWatchEnd(t *testing.T) {
	gone := &unreachableError{err: refusedConnection()}
	cut := func() context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(gone)
		return ctx
	}
	tests := map[string]struct {
		ctx  context.Context
		err  error
		want string // "": nil
	}{
		"met":                            {ctx: cut(), err: nil},
		"gone, the channel closed first": {ctx: cut(), err: watchtools.ErrWatchClosed, want: gone.Error()},
		"gone, the context done first":   {ctx: cut(), err: wait.ErrorInterrupted(errors.New("timed out waiting for the condition")), want: gone.Error()},
		"the watch ended":                {ctx: context.Background(), err: watchtools.ErrWatchClosed, want: "the watch ended"},
		"the watch ended with an error":  {ctx: context.Background(), err: errors.New("the watch ended with an error: 500"), want: "the watch ended with an error: 500"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := watchEnd(tc.ctx, tc.err); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("watchEnd = %q, want %q", got, tc.want)
			}
		})
	}
}

// writeKubeconfig is a kubeconfig of one cluster and one user, as given, namespace default.
func writeKubeconfig(t *testing.T, cluster, user map[string]any) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Config",
		"clusters":        []any{map[string]any{"name": "c", "cluster": cluster}},
		"users":           []any{map[string]any{"name": "u", "user": user}},
		"contexts":        []any{map[string]any{"name": "c", "context": map[string]any{"cluster": "c", "user": "u", "namespace": "default"}}},
		"current-context": "c"})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// tlsAPIServer is a fadingAPIServer over TLS that never goes and answers one request per
// connection (no keep-alive), so that every request makes its connection anew, with its TLS
// handshake; handshake, when set, is the configuration of the nth handshake (from 1), or its
// error (nil, nil: the server's own certificate).
func tlsAPIServer(t *testing.T, status map[string]any, handshake func(n int) (*tls.Config, error)) *fadingAPIServer {
	t.Helper()
	s := &fadingAPIServer{action: "active", status: status, drop: func(string, int) bool { return false }, count: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.SetKeepAlivesEnabled(false)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes the tests fail on purpose
	var handshakes atomic.Int32
	s.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		if handshake == nil {
			return nil, nil
		}
		return handshake(int(handshakes.Add(1)))
	}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// caData is the server's certificate in PEM, for a kubeconfig's certificate-authority-data.
func caData(s *httptest.Server) string {
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}))
}

// strangerCertificate is a certificate for 127.0.0.1 that no kubeconfig of the tests trusts.
func strangerCertificate(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stranger"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// connectProxy is an HTTP proxy that tunnels the first CONNECT it is asked and answers every
// other 403 Forbidden: a proxy that stops letting the plugin through.
func connectProxy(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for n := 1; ; n++ {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func(conn net.Conn, n int) {
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil || req.Method != http.MethodConnect {
					return
				}
				if n > 1 {
					fmt.Fprint(conn, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
					return
				}
				target, err := net.Dial("tcp", req.Host)
				if err != nil {
					fmt.Fprint(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
					return
				}
				defer target.Close()
				fmt.Fprint(conn, "HTTP/1.1 200 OK\r\n\r\n")
				go func() { _, _ = io.Copy(target, conn) }()
				_, _ = io.Copy(conn, target)
			}(conn, n)
		}
	}()
	return "http://" + l.Addr().String()
}

// credentialsOnce is a kubeconfig credential plugin (exec) that gives a token the first time
// it runs, expired already, so that client-go runs it again for the next request, and fails
// every time after: a token service that goes.
func credentialsOnce(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "credentials")
	script := `#!/bin/sh
if [ -e "$0.ran" ]; then exit 1; fi
touch "$0.ran"
echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"2000-01-01T00:00:00Z"}}'
`
	if err := os.WriteFile(file, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestRequestsNeverSent: a request that failed before it was sent (its credentials could not
// be had, the proxy refused the tunnel, the TLS handshake failed, the cluster's certificate is
// not trusted, the connection was refused) ends the verb with one line and exit 1 that says
// what failed, and, of a write, not that it may have been made: nothing was sent. A credential
// plugin that fails is not "cannot reach the cluster" but "cannot authenticate to the
// cluster", and a certificate the kubeconfig does not trust "cannot verify the cluster's
// certificate", at the first read as at any request after it. Each write case reads the VM
// (restart) and fails at its write, each request over a connection of its own.
func TestRequestsNeverSent(t *testing.T) {
	running := map[string]any{"phase": "Active", "reason": "ServerReady", "observedGeneration": 1,
		"server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running", "node": "node-a"}}
	stranger := strangerCertificate(t)
	// kubeconfig is that of a TLS API server whose nth handshake is handshake's, with user.
	kubeconfig := func(t *testing.T, handshake func(n int) (*tls.Config, error), user map[string]any, proxy bool) string {
		s := tlsAPIServer(t, running, handshake)
		cluster := map[string]any{"server": s.URL, "certificate-authority-data": caData(s.Server)}
		if proxy {
			cluster["proxy-url"] = connectProxy(t)
		}
		if user == nil {
			user = map[string]any{"token": "x"}
		}
		return writeKubeconfig(t, cluster, user)
	}
	after1 := func(later func() (*tls.Config, error)) func(int) (*tls.Config, error) {
		return func(n int) (*tls.Config, error) {
			if n == 1 {
				return nil, nil
			}
			return later()
		}
	}
	tests := map[string]struct {
		verb           string
		kubeconfig     func(t *testing.T) string
		prefix, suffix string
	}{
		"credential plugin fails at the first read": {verb: "status", kubeconfig: func(t *testing.T) string {
			s := tlsAPIServer(t, running, nil)
			return writeKubeconfig(t, map[string]any{"server": s.URL, "certificate-authority-data": caData(s.Server)},
				map[string]any{"exec": map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": "false", "interactiveMode": "Never"}})
		}, prefix: "cannot authenticate to the cluster: Get ", suffix: "getting credentials: exec: executable false failed with exit code 1"},
		"certificate not trusted at the first read": {verb: "status", kubeconfig: func(t *testing.T) string {
			s := tlsAPIServer(t, running, nil)
			return writeKubeconfig(t, map[string]any{"server": s.URL}, map[string]any{"token": "x"})
		}, prefix: "cannot verify the cluster's certificate: Get ", suffix: "x509: certificate signed by unknown authority"},
		"credential plugin fails at the write": {verb: "restart", kubeconfig: func(t *testing.T) string {
			return kubeconfig(t, nil, map[string]any{"exec": map[string]any{"apiVersion": "client.authentication.k8s.io/v1",
				"command": credentialsOnce(t), "interactiveMode": "Never"}}, false)
		}, prefix: "cannot authenticate to the cluster: Patch ", suffix: "failed with exit code 1"},
		"certificate not trusted at the write": {verb: "restart", kubeconfig: func(t *testing.T) string {
			return kubeconfig(t, after1(func() (*tls.Config, error) { return &tls.Config{Certificates: []tls.Certificate{stranger}}, nil }), nil, false)
		}, prefix: "cannot verify the cluster's certificate: Patch ", suffix: "x509: certificate signed by unknown authority"},
		"TLS handshake fails at the write": {verb: "restart", kubeconfig: func(t *testing.T) string {
			return kubeconfig(t, after1(func() (*tls.Config, error) { return nil, errors.New("no") }), nil, false)
		}, prefix: "cannot reach the cluster: Patch ", suffix: "remote error: tls: internal error"},
		"proxy refuses the tunnel at the write": {verb: "restart", kubeconfig: func(t *testing.T) string {
			return kubeconfig(t, nil, nil, true)
		}, prefix: "cannot reach the cluster: Patch ", suffix: ": Forbidden"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			app := Plugin("test")
			var out bytes.Buffer
			app.Writer, app.ErrWriter = &out, &out
			err := app.Run(PluginArgs([]string{PluginName, tc.verb, "vm1", "--kubeconfig", tc.kubeconfig(t)}))
			var ec cli.ExitCoder
			if err == nil || !errors.As(err, &ec) || ec.ExitCode() != 1 || !strings.HasPrefix(err.Error(), tc.prefix) ||
				!strings.HasSuffix(err.Error(), tc.suffix) || strings.Contains(err.Error(), "\n") || out.Len() != 0 {
				t.Errorf("%v, output %q; want exit 1, one line %q...%q, nothing said of a write that may have been made", err, out.String(), tc.prefix, tc.suffix)
			}
		})
	}
}

// settableClock is a clock a test moves by hand: the reach's now reads it from its own
// goroutines (a watch's end, a failure) while the test advances it, hence the lock.
type settableClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *settableClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *settableClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// TestEmptyWatchIsNoAnswer: a watch call that returns without an error is no answer of the
// API server by itself: client-go returns an empty watch and no error once its attempts (10,
// a second apart) met only EOFs or timeouts, as before a load balancer whose API server is
// gone. Counted as one, it set the grace's clock back at each watch made again, and with a
// grace longer than client-go's attempts (the default) the wait ran its whole --timeout.
func TestEmptyWatchIsNoAnswer(t *testing.T) {
	clock := &settableClock{at: pluginNow}
	ctx, cut := context.WithCancelCause(context.Background())
	r := newReach(time.Minute, clock.now, cut)
	defer r.stop()
	r.begin()
	eof := &url.Error{Op: "Get", URL: "https://lb.example:6443/apis/cloudnative.czs/v1alpha1/namespaces/ns/virtualmachines?watch=true", Err: io.EOF}
	for range 6 {
		// client-go's attempts, a second apart, each without an answer (as the transport
		// tells them), then its empty watch, which ends at once.
		clock.advance(11 * time.Second)
		r.failed(eof)
		w := holdWatch(watch.NewEmptyWatch(), r)
		for range w.ResultChan() {
		}
		w.Stop()
	}
	var gone *unreachableError
	if !errors.As(context.Cause(ctx), &gone) || gone.err != eof {
		t.Fatalf("after 66s of empty watches: cause %v, want the cluster taken for gone, on the EOF", context.Cause(ctx))
	}
}

// TestWatchHeldIsAnAnswer: a watch the API server holds open without a word (a quiet VM) keeps
// the cluster reached, and its end, once held waitHeld, is an answer: the first failure after
// a quiet minute does not end the wait at once.
func TestWatchHeldIsAnAnswer(t *testing.T) {
	clock := &settableClock{at: pluginNow}
	ctx, cut := context.WithCancelCause(context.Background())
	r := newReach(time.Minute, clock.now, cut)
	defer r.stop()
	r.begin()
	quiet := watch.NewRaceFreeFake()
	w := holdWatch(quiet, r)
	clock.advance(5 * time.Minute)
	r.failed(refusedConnection()) // another request, while the watch is open
	quiet.Stop()                  // the connection goes
	for range w.ResultChan() {
	}
	r.failed(refusedConnection()) // the watch made again, refused
	if cause := context.Cause(ctx); cause != nil {
		t.Fatalf("cause %v after a watch held 5 minutes, want the wait going on", cause)
	}
}

// TestRequestErrorIsTransparent: the plugin's transport passes a failure on in a form that
// client-go reads as it read the failure itself: it makes a GET or a watch again after an EOF
// (by identity), a connection reset or a timeout (through url.Error.Timeout, which asks its
// Err directly).
func TestRequestErrorIsTransparent(t *testing.T) {
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ETIMEDOUT)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	tests := map[string]struct {
		err   error
		check func(error) bool
	}{
		"EOF":              {io.EOF, utilnet.IsProbableEOF},
		"unexpected EOF":   {io.ErrUnexpectedEOF, utilnet.IsProbableEOF},
		"timeout":          {timeout, utilnet.IsTimeout},
		"connection reset": {reset, utilnet.IsConnectionReset},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rt := &tracedTransport{next: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, tc.err })}
			req, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1:6443/api", nil)
			_, err := rt.RoundTrip(req)
			got, want := &url.Error{Op: "Get", URL: req.URL.String(), Err: err}, &url.Error{Op: "Get", URL: req.URL.String(), Err: tc.err}
			if !tc.check(got) || got.Error() != want.Error() {
				t.Errorf("%v: client-go does not read it as %v", got, want)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestWaitUnreachableTimeoutZero: with --unreachable-timeout 0, wait on a cluster that went
// waits out --timeout, as kubectl wait does, and its line gives the last failure.
func TestWaitUnreachableTimeoutZero(t *testing.T) {
	running := map[string]any{"phase": "Active", "reason": "ServerReady", "observedGeneration": 1}
	srv := newFadingAPIServer(t, "active", running, func(kind string, n int) bool { return kind == "watch" && n == 1 })
	app := Plugin("test")
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	start := time.Now()
	err := app.Run(PluginArgs([]string{PluginName, "wait", "vm1", "--for", "phase=Inactive", "--timeout", "2500ms", "--unreachable-timeout", "0",
		"--kubeconfig", srv.kubeconfig(t)}))
	const want = "timed out after 2.5s waiting for phase=Inactive of virtualmachine/vm1; last seen: phase Active (ServerReady) (last error: cannot reach the cluster: Get "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "connect: connection refused)") {
		t.Errorf("%v, want %q...", err, want)
	}
	if took := time.Since(start); took < 2500*time.Millisecond {
		t.Errorf("ended after %s, want --timeout waited out", took)
	}
}
