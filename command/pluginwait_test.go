package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

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
// returns it.
func refusedConnection() error {
	return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/apis/cloudnative.czs/v1alpha1/namespaces/ns/virtualmachines",
		Err: &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6443},
			Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
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
		if err := v.wait(context.Background(), "vm1", w, "phase=Active", 5*time.Second); err != nil {
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
		err := v.wait(context.Background(), "vm1", w, "phase=Active", 500*time.Millisecond)
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
// without an answer, and it goes (it stops listening and drops every connection), so that
// every request after is refused its connection. A watch it answers stays open, without
// events, until it goes; a watch it goes at is first opened (its headers sent), as a watch
// the API server drops when it stops.
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

	mu    sync.Mutex
	count map[string]int
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
	s.mu.Unlock()
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

// goes stops the server listening and drops every connection, the one of w's request first,
// without an answer.
func (s *fadingAPIServer) goes(w http.ResponseWriter) {
	s.Listener.Close()
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
	s.CloseClientConnections()
}

// TestVerbsUnreachableMidway: a cluster that stops answering after a verb's first read (the
// read of the VM answered) ends the verb as one that never answered does (TestVerbsUnreachable):
// exit 1, one line "cannot reach the cluster: ...", nothing printed. Not the HTTP client's error
// behind "write virtualmachine vm1: Patch ..." (start, stop, restart), "read the server pod
// ..." (migrate), a line Pod: and exit 0 (status), nor, of wait, a wait of its whole --timeout
// that then reports "timed out": wait goes on across such a failure for waitReachGrace only.
// A write whose connection went after it was sent may have been made, and the line says so.
func TestVerbsUnreachableMidway(t *testing.T) {
	defer func(g time.Duration) { waitReachGrace = g }(waitReachGrace)
	waitReachGrace = 300 * time.Millisecond
	running := map[string]any{"phase": "Active", "reason": "ServerReady", "observedGeneration": 1,
		"server": map[string]any{"name": "vm1-server", "id": "u", "state": "Running", "node": "node-a"}}
	at := func(kind string, nth int) func(string, int) bool {
		return func(k string, n int) bool { return k == kind && n == nth }
	}
	const mayHaveBeenMade = " (the write may have been made all the same: look at the VM before running the verb again)"
	tests := map[string]struct {
		args   []string
		action string
		status map[string]any
		drop   func(string, int) bool
		expire bool
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
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := newFadingAPIServer(t, tc.action, tc.status, tc.drop)
			srv.expire = tc.expire
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
