//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// kubectlWatch runs a `kubectl ... --watch` for the rest of a test and keeps what it prints,
// so that a test can read, in order, every change the API server reported however briefly it
// lasted (podWatch, serverWatch).
type kubectlWatch struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	errOut bytes.Buffer
	exited chan struct{}
}

// startKubectlWatch starts kubectl with args against the test cluster; the watch is killed
// when the test ends.
func startKubectlWatch(t *testing.T, args ...string) *kubectlWatch {
	t.Helper()
	w := &kubectlWatch{exited: make(chan struct{})}
	w.cmd = exec.Command(kubectlBin, args...)
	w.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	w.cmd.Stdout, w.cmd.Stderr = w, &w.errOut
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = w.cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.exited
	})
	return w
}

func (w *kubectlWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(p)
}

// lines is what the watch printed so far, a line each.
func (w *kubectlWatch) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Split(strings.TrimSpace(w.out.String()), "\n")
}

// running fails the test if the watch ended: what it printed would no longer be every change.
func (w *kubectlWatch) running(t *testing.T) {
	t.Helper()
	select {
	case <-w.exited:
		t.Fatalf("the watch ended: %s", w.errOut.String())
	default:
	}
}
