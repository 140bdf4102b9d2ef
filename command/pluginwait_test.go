package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
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
