// The leader scenario: how long a VM waits when the leader goes, for two replicas of
// vm-controller with --leader-elect. A graceful stop (SIGTERM) releases the Lease, so the
// standby takes over within about a retry period; a crash (SIGKILL) leaves the Lease held
// until it expires, so the standby waits out the lease duration.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudnative-czs/vm-controller/bench/record"
)

// leaderFlags are the leader scenario's flags; empty durations leave vm-controller's defaults.
type leaderFlags struct {
	reps                int
	lease, renew, retry string
	timeout             time.Duration
	kubeconfig          string
}

// handoff is one measured change of leader: from the signal to the new leader's "Became the
// leader", and to a VM created right after the signal being Active.
type handoff struct {
	lease, active time.Duration
}

func leaderScenario(args []string) error {
	var f leaderFlags
	fs := flag.NewFlagSet("leader", flag.ExitOnError)
	fs.IntVar(&f.reps, "reps", 3, "repetitions (each a fresh namespace, a graceful stop and a crash)")
	fs.StringVar(&f.lease, "lease-duration", "", "the replicas' --lease-duration; empty: vm-controller's default")
	fs.StringVar(&f.renew, "renew-deadline", "", "the replicas' --renew-deadline; empty: vm-controller's default")
	fs.StringVar(&f.retry, "retry-period", "", "the replicas' --retry-period; empty: vm-controller's default")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "longest wait for any one step")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig; empty: $KUBECONFIG or the checkout's .cache/kubeconfig")
	resultsDir := resultsFlag(fs)
	_ = fs.Parse(args)
	rec := newRecording("leader", fs, args, *resultsDir)

	base, err := connect(f.kubeconfig)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "vm-controller-leader")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if base.binary, err = buildController(dir); err != nil {
		return err
	}
	var graceful, crash []handoff
	for rep := 1; rep <= f.reps; rep++ {
		started := time.Now()
		g, c, err := leaderRun(base, f, rep)
		if err != nil {
			return fmt.Errorf("repetition %d: %w", rep, err)
		}
		fmt.Printf("rep %d: SIGTERM: new leader after %s, first VM Active after %s; SIGKILL: new leader after %s, first VM Active after %s\n",
			rep, g.lease.Round(time.Millisecond), g.active.Round(time.Millisecond), c.lease.Round(time.Millisecond), c.active.Round(time.Millisecond))
		graceful, crash = append(graceful, g), append(crash, c)
		rec.add("vm-controller", false, record.Repetition{Rep: rep, Started: started, Figures: []record.Figure{
			{Name: "SIGTERM: signal to new leader", Value: g.lease.Seconds(), Unit: "s"},
			{Name: "SIGTERM: signal to that VM Active", Value: g.active.Seconds(), Unit: "s"},
			{Name: "SIGKILL: signal to new leader", Value: c.lease.Seconds(), Unit: "s"},
			{Name: "SIGKILL: signal to that VM Active", Value: c.active.Seconds(), Unit: "s"},
		}})
	}
	fmt.Printf("\nmedian of %d (lease duration %s, renew deadline %s, retry period %s):\n", f.reps,
		orDefault(f.lease), orDefault(f.renew), orDefault(f.retry))
	fmt.Println("| leader stopped by | signal -> new leader | signal -> first VM Active |")
	fmt.Println("|---|---|---|")
	for _, row := range []struct {
		name string
		h    []handoff
	}{{"SIGTERM (Lease released)", graceful}, {"SIGKILL (Lease expires)", crash}} {
		fmt.Printf("| %s | %s | %s |\n", row.name, medianDuration(row.h, func(h handoff) time.Duration { return h.lease }),
			medianDuration(row.h, func(h handoff) time.Duration { return h.active }))
	}
	return rec.finish()
}

// leaderRun runs two replicas in a fresh namespace, stops the leader with SIGTERM, then
// starts a third replica and kills the new leader with SIGKILL.
func leaderRun(base *env, f leaderFlags, rep int) (graceful, crash handoff, err error) {
	e, err := base.fork()
	if err != nil {
		return graceful, crash, err
	}
	defer e.close()
	replica := func(id string) (*controller, error) {
		args := []string{"--leader-elect", "--lease-namespace", e.ns, "--holder-identity", id, "--health-addr", "127.0.0.1:0",
			"--usage-interval", "0"}
		for flagName, v := range map[string]string{"--lease-duration": f.lease, "--renew-deadline": f.renew, "--retry-period": f.retry} {
			if v != "" {
				args = append(args, flagName, v)
			}
		}
		return e.startController(args...)
	}
	a, err := replica("a")
	if err != nil {
		return graceful, crash, err
	}
	b, err := replica("b")
	if err != nil {
		return graceful, crash, err
	}
	var leader, standby *controller
	select {
	case <-a.leading:
		leader, standby = a, b
	case <-b.leading:
		leader, standby = b, a
	case <-time.After(f.timeout):
		return graceful, crash, fmt.Errorf("no replica became the leader within %s", f.timeout)
	}
	if err := standby.waitReady(f.timeout); err != nil {
		return graceful, crash, err
	}
	w, err := e.watchVMs()
	if err != nil {
		return graceful, crash, err
	}
	// A first VM shows the leader at work before it is stopped.
	if _, err := w.createAndWait(e, fmt.Sprintf("warm-%d", rep), time.Now(), f.timeout); err != nil {
		return graceful, crash, err
	}

	if graceful, err = measureHandoff(e, w, leader, standby, syscall.SIGTERM, "term", f.timeout); err != nil {
		return graceful, crash, fmt.Errorf("SIGTERM: %w", err)
	}
	c, err := replica("c")
	if err != nil {
		return graceful, crash, err
	}
	if err := c.waitReady(f.timeout); err != nil {
		return graceful, crash, err
	}
	if crash, err = measureHandoff(e, w, standby, c, syscall.SIGKILL, "kill", f.timeout); err != nil {
		return graceful, crash, fmt.Errorf("SIGKILL: %w", err)
	}

	// Delete the namespace while the leader runs, so that it releases the finalizers.
	start := time.Now()
	if err := e.kube.CoreV1().Namespaces().Delete(context.Background(), e.ns, metav1.DeleteOptions{}); err != nil {
		return graceful, crash, fmt.Errorf("delete namespace: %w", err)
	}
	for {
		if _, err := e.kube.CoreV1().Namespaces().Get(context.Background(), e.ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		}
		if time.Since(start) > f.timeout {
			return graceful, crash, fmt.Errorf("namespace %s still there %s after its delete", e.ns, f.timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return graceful, crash, nil
}

// measureHandoff signals the leader, creates a VM right after (so that only the next leader
// can reconcile it: a stopping leader's queue takes no new work, a killed one has none), and
// measures until the next leader says it leads and until the VM is Active. It checks that
// the next leader is the one that reconciled.
func measureHandoff(e *env, w *vmWatch, leader, next *controller, sig syscall.Signal, name string, timeout time.Duration) (handoff, error) {
	var h handoff
	at := time.Now()
	if err := leader.cmd.Process.Signal(sig); err != nil {
		return h, fmt.Errorf("signal the leader: %w", err)
	}
	active, err := w.createAndWait(e, name, at, timeout)
	if err != nil {
		return h, err
	}
	h.active = active
	select {
	case t := <-next.leading:
		h.lease = t.Sub(at)
	case <-time.After(timeout):
		return h, errors.New("the standby never logged that it leads")
	}
	m, err := next.scrape()
	if err != nil {
		return h, err
	}
	if sum(m, "vmcontroller_reconcile_total") == 0 {
		return h, errors.New("the VM became Active, but the new leader reconciled nothing")
	}
	select {
	case <-leader.exited:
	case <-time.After(timeout):
		return h, fmt.Errorf("the old leader did not exit within %s", timeout)
	}
	return h, nil
}

// createAndWait creates VM name and returns the time from at until it is first seen Active.
func (w *vmWatch) createAndWait(e *env, name string, at time.Time, timeout time.Duration) (time.Duration, error) {
	vm := newVM(0)
	vm.SetName(name)
	w.created(name)
	if _, err := e.dyn.Resource(vmGVR).Namespace(e.ns).Create(context.Background(), vm, metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("create VM %s: %w", name, err)
	}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		t, ok := w.activeAt[name]
		w.mu.Unlock()
		if ok {
			return t.Sub(at), nil
		}
	}
	return 0, fmt.Errorf("VM %s not Active within %s", name, timeout)
}

// deleteAndWait deletes VM name and waits until the watch sees it gone: its controller has
// released it.
func (w *vmWatch) deleteAndWait(e *env, name string, timeout time.Duration) error {
	if err := e.dyn.Resource(vmGVR).Namespace(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete VM %s: %w", name, err)
	}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, ok, _ := w.informer.GetStore().GetByKey(e.ns + "/" + name); !ok {
			return nil
		}
	}
	return fmt.Errorf("VM %s not gone within %s", name, timeout)
}

// waitReady waits until a replica's /readyz answers 200: its caches are synced, so that a
// takeover measures the election and not a cold start.
func (c *controller) waitReady(timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + c.health + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("replica not ready within %s", timeout)
}

func medianDuration(hs []handoff, f func(handoff) time.Duration) time.Duration {
	d := make([]time.Duration, len(hs))
	for i, h := range hs {
		d[i] = f(h)
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	if len(d)%2 == 1 {
		return d[len(d)/2].Round(time.Millisecond)
	}
	return ((d[len(d)/2-1] + d[len(d)/2]) / 2).Round(time.Millisecond)
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}
