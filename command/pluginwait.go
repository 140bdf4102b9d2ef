// The verbs that read a VM: wait (until a phase or condition holds, or a timeout) and status
// (what the VM, its server and its disk say, in kubectl's style).

package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// waitConfig is wait's: the plugin's flags, what to wait for, for how long, and for how long
// without an answer of the API server once the VM was read.
type waitConfig struct {
	pluginConfig
	For                string
	Timeout            time.Duration
	UnreachableTimeout time.Duration
}

// waitFor is a parsed --for: a phase, or a condition with the status it must have.
type waitFor struct {
	phase     schema.Phase
	condition string
	status    schema.ConditionStatus
}

// parseFor reads --for: phase=NAME, condition=TYPE (status True) or condition=TYPE=STATUS. The
// phase and the status are read in any case; the type is matched in any case (holds), as
// kubectl wait matches it.
func parseFor(s string) (waitFor, error) {
	kind, rest, ok := strings.Cut(s, "=")
	switch {
	case !ok || rest == "":
	case kind == "phase":
		for _, p := range []schema.Phase{schema.PhaseCreating, schema.PhaseActive, schema.PhaseInactive, schema.PhaseFailed,
			schema.PhaseTerminating, schema.PhaseUnknown} {
			if strings.EqualFold(rest, string(p)) {
				return waitFor{phase: p}, nil
			}
		}
		return waitFor{}, fmt.Errorf("--for %s: no phase %q (Creating, Active, Inactive, Failed, Terminating, Unknown)", s, rest)
	case kind == "condition":
		t, status, hasStatus := strings.Cut(rest, "=")
		w := waitFor{condition: t, status: schema.ConditionTrue}
		if hasStatus {
			switch strings.ToLower(status) {
			case "true":
			case "false":
				w.status = schema.ConditionFalse
			case "unknown":
				w.status = schema.ConditionUnknown
			default:
				return waitFor{}, fmt.Errorf("--for %s: a condition's status is True, False or Unknown", s)
			}
		}
		if t != "" {
			return w, nil
		}
	}
	return waitFor{}, fmt.Errorf("--for %q: want phase=NAME, condition=TYPE or condition=TYPE=STATUS", s)
}

// met reports whether vm satisfies w. Only a status that describes the VM as it is counts
// (schema's Settled: the controller has observed its generation and acted on every restart,
// start, stop and migration request it carries), so that a wait right after a verb does not
// return on the status from before it, the old server's Ready; a VM being deleted counts as
// it is, its requests no longer acted on.
func (w waitFor) met(vm schema.VirtualMachine) bool {
	return (current(vm) || strings.EqualFold(w.condition, schema.ConditionPaused) && paused(vm)) && w.holds(vm.Status())
}

// current reports whether vm's status describes it as it is: it is Settled, or it is being
// deleted, or its spec was refused at this generation (Failed, InvalidSpec: the controller
// acts on no request until the spec is fixed, and carries it out then). The status of a paused
// VM never is, being deleted or not: the controller writes only its Paused condition (paused),
// and the rest is as it was before the pause (an old server's Ready, Active with the server
// gone). Nor is it once the VM is resumed, until the controller writes the status again, which
// drops the condition.
func current(vm schema.VirtualMachine) bool {
	if vm.Paused() || pausedStatus(vm.Status()) {
		return false
	}
	if vm.Settled() || vm.Deleting() {
		return true
	}
	st := vm.Status()
	return st.Phase == schema.PhaseFailed && st.Reason == decision.ReasonInvalidSpec && st.ObservedGeneration == vm.Generation()
}

// paused reports whether vm is paused and its status says so: the condition Paused is all the
// controller writes of a paused VM, so the rest of its status (an old server's Ready, a request
// not acted on) is not current, but that condition is. A VM whose annotation is gone while its
// status still says Paused has yet to be resumed.
func paused(vm schema.VirtualMachine) bool {
	return vm.Paused() && pausedStatus(vm.Status())
}

// pausedStatus reports whether st has the condition Paused, True: the controller wrote it
// while the VM was paused, and removes it at its first write after.
func pausedStatus(st schema.Status) bool {
	c := st.Condition(schema.ConditionPaused)
	return c != nil && c.Status == schema.ConditionTrue
}

// holds reports whether st satisfies w; a condition's type in any case (condition=ready is
// Ready), as kubectl wait matches it. Phase Inactive holds once the server is gone: while
// it shuts down the phase is Inactive already, with the reason Stopping (a stop request) or
// ServerStopping (runStrategy Halted), or NodeLost while its node does not answer (it may
// still run there).
func (w waitFor) holds(st schema.Status) bool {
	if w.phase != "" {
		return st.Phase == w.phase && !serverLeft(st)
	}
	for _, c := range st.Conditions {
		if strings.EqualFold(c.Type, w.condition) {
			return c.Status == w.status // the first of the type, as kubectl wait reads it
		}
	}
	return false
}

// serverLeft reports whether st is phase Inactive with its server not gone yet: it shuts down
// (Stopping under a stop request, ServerStopping under runStrategy Halted), or its node does
// not answer (NodeLost: it may still run there).
func serverLeft(st schema.Status) bool {
	return st.Phase == schema.PhaseInactive && (st.Reason == decision.ReasonStopping ||
		st.Reason == decision.ReasonServerStopping || st.Reason == decision.ReasonNodeLost)
}

// Validate checks --for and --timeout.
func (c *waitConfig) Validate() error {
	var errs []string
	if err := c.pluginConfig.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if c.For == "" {
		errs = append(errs, "--for is required: phase=NAME or condition=TYPE[=STATUS]")
	} else if _, err := parseFor(c.For); err != nil {
		errs = append(errs, err.Error())
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Sprintf("--timeout %s: want a positive duration such as 30s", c.Timeout))
	}
	if c.UnreachableTimeout < 0 {
		errs = append(errs, fmt.Sprintf("--unreachable-timeout %s: want a positive duration such as 1m, or 0 to wait out --timeout", c.UnreachableTimeout))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func waitCommand(c *waitConfig, version string) *cli.Command {
	return &cli.Command{
		Name:      "wait",
		Usage:     "wait until a VM's phase or condition is the one given",
		ArgsUsage: "NAME",
		Description: "Watches the VM until --for holds, as kubectl wait does, in a status that has observed the VM's generation and " +
			"every restart, start, stop and migration request it carries; phase Inactive holds once the server is gone. Phases and " +
			"condition types match in any case. Of a paused VM only condition=Paused holds: any other wait goes on until it is " +
			"resumed and the controller reports it again. Past --timeout it exits with 1 and the phase, reason and message it last saw. " +
			"A first read that gets no answer from the API server (cannot reach the cluster) ends it at once, exit 1, rather than wait out --timeout; " +
			"once the VM was read, reads and watches without an answer are taken for the API server restarting and made again, until none has " +
			"answered for --unreachable-timeout, which then ends it the same way, with what it last saw. A request whose credentials cannot be had " +
			"(cannot authenticate to the cluster) or whose cluster's certificate the kubeconfig does not trust (cannot verify the cluster's certificate) " +
			"ends it at once, exit 1: waiting does not mend either.",
		Flags: append(c.flags(),
			&cli.StringFlag{Name: "for", Usage: "what to wait for: phase=NAME (phase=Active), condition=TYPE (condition=Ready) or condition=TYPE=STATUS", Destination: &c.For},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "how long to wait", Destination: &c.Timeout},
			&cli.DurationFlag{Name: "unreachable-timeout", Value: waitReachGrace, Destination: &c.UnreachableTimeout,
				Usage: "how long wait goes on, once it read the VM, while no request gets an answer from the API server (one that restarts takes " +
					"15 to 45s) before it ends, exit 1 (cannot reach the cluster); 0: until --timeout"}),
		Action: action(c, oneName, func(cc *cli.Context) error {
			v, name, err := c.connect(cc, version)
			if err != nil {
				return err
			}
			w, _ := parseFor(c.For)
			return v.wait(cc.Context, name, w, c.For, c.Timeout, c.UnreachableTimeout)
		}),
	}
}

// waitBackoff spaces the lists of wait after a list that failed, or a watch that cannot go on,
// for a reason that may pass (the connection went, the API server was busy, the watch fell
// behind the history the API server keeps): 100ms doubling up to 5s, started again every
// waitBackoffReset. A refusal (forbidden, unauthorized, not found) ends wait at once instead.
var (
	waitBackoff      = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 10, Cap: 5 * time.Second}
	waitBackoffReset = time.Minute
)

// waitReachGrace is the default of --unreachable-timeout: how long wait goes on, once it has
// read the VM, while no request gets an answer from the API server. It must outlast an API
// server's restart, which a wait that ended on it would fail for nothing (a pipeline's step
// that would have passed): the kubelet's replacement of a static pod (kubeadm, an upgrade),
// or a k3s restart, takes 15 to 45s; a cluster gone for good is said a minute later than it
// could be, which --timeout bounds anyway. A variable for the tests.
var waitReachGrace = time.Minute

// waitHeld is how long a watch must have stayed open for its end to count as an answer of the
// API server (reach.release): one the API server holds stays open until it ends it (minutes
// on) or the connection goes, while client-go's empty watch, which it returns with no error
// once its attempts met only EOFs or timeouts, ends at once.
const waitHeld = time.Second

// errNoAnswer is what wait ends on when the cluster is taken for gone and no request of the
// grace failed: each waited for an answer that did not come (an API server that is stuck, an
// address where nothing answers, a dial that takes its 30s to time out).
var errNoAnswer = errors.New("the API server gave no answer")

// reach is what wait knows, once it has read the VM, of the API server's answers: when the
// last came, how many watches it holds open, and the requests that wait for an answer or got
// none since. It ends the wait (cut, its cause an unreachableError) once none answered for
// grace while no watch was held open and a request got no answer or still waits for one: the
// cluster is taken for gone.
//
// What counts as an answer: any HTTP answer to an attempt of a request (the plugin's
// transport sees each, client-go's own retries included: attemptObserver), a list that
// returns, with an error of the API server's or not, an event or a bookmark of a watch, and a
// watch held open, until its end once it stayed open waitHeld (holdWatch). A watch call that
// returns with no error is not one: client-go returns an empty watch and no error once its
// attempts met only EOFs or timeouts (a load balancer before an API server that is gone takes
// each connection and closes it), and counting it reached the cluster at each of them. A
// watch open without a word counts as one all the same, or a quiet VM would leave the last
// answer minutes old and the first failure after would end the wait at once; the API server
// ends its watches or the connection goes (TCP keep-alive notices a host gone silent), and
// the count goes on from there.
//
// Fed by the transport, by wait (its list's and watch's answers and failures: a test's fake
// client has no transport), and by the watches; the timer ends a wait whose requests wait
// for an answer (a dial that hangs): nothing else would. Safe for those goroutines.
type reach struct {
	grace time.Duration // 0: never gone
	now   func() time.Time
	cut   context.CancelCauseFunc

	mu       sync.Mutex
	started  bool      // the VM was read: the count is on
	last     time.Time // the last answer
	held     int       // watches open
	inflight int       // attempts under way
	failure  error     // the last request that got no answer since last (*url.Error)
	timer    *time.Timer
	stopped  bool // the wait is over: the timer is not set again
}

func newReach(grace time.Duration, now func() time.Time, cut context.CancelCauseFunc) *reach {
	return &reach{grace: grace, now: now, cut: cut}
}

// begin starts the count, at a read of the VM: an answer, and the first that counts.
func (r *reach) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = true
	r.answeredLocked()
}

// answered records an answer of the API server.
func (r *reach) answered() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answeredLocked()
}

func (r *reach) answeredLocked() {
	if !r.started {
		return
	}
	r.last, r.failure = r.now(), nil
	r.arm(r.grace)
}

// failed records a request that got no answer (why: the HTTP client's error), and ends the
// wait when none has answered for the grace.
func (r *reach) failed(why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failedLocked(why)
}

func (r *reach) failedLocked(why error) {
	if !r.started {
		return
	}
	r.failure = why
	r.check()
}

// attempting and attempted are the transport's (attemptObserver).
func (r *reach) attempting() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight++
}

func (r *reach) attempted(why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight--
	switch {
	case why == nil:
		r.answeredLocked()
	case !errors.Is(why, errAttemptAbandoned):
		r.failedLocked(why)
	}
}

// hold records a watch open; release its end, after it stayed open for heldFor.
func (r *reach) hold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held++
}

func (r *reach) release(heldFor time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held--
	if heldFor >= waitHeld {
		r.answeredLocked()
		return
	}
	r.check()
}

// check, with mu held, ends the wait if the cluster is gone, or arms the timer for when it
// may be. While a watch is held it waits for its release; once the grace is past with nothing
// in flight and no failure (between two tries), for the next try, which checks again, or
// another grace.
func (r *reach) check() {
	if !r.started || r.grace <= 0 || r.held > 0 {
		return
	}
	if left := r.grace - r.now().Sub(r.last); left > 0 {
		r.arm(left)
		return
	}
	if r.failure == nil && r.inflight == 0 {
		r.arm(r.grace)
		return
	}
	why := r.failure
	if why == nil {
		why = errNoAnswer
	}
	r.cut(&unreachableError{err: why})
}

// arm sets the timer to check again after d.
func (r *reach) arm(d time.Duration) {
	if r.grace <= 0 || r.stopped {
		return
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(d, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.check()
		})
		return
	}
	r.timer.Reset(d)
}

// stop stops the timer, at the wait's end (a watch's last release may come after).
func (r *reach) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.timer != nil {
		r.timer.Stop()
	}
}

// wait watches the VM until w holds, or the timeout passes: it lists the VM and watches it
// from the list's resourceVersion, and lists again when the watch cannot go on. A first read
// that gets no answer (unanswered: nothing listens, the name does not resolve, TLS fails) ends
// it at once, as it ends every verb: nothing says the cluster is there, and an API server
// restarts in longer than a few quick tries would cover, so waiting out the timeout would only
// delay the same answer. Once the VM has been read the cluster was there, and a list or watch
// without an answer is taken for a blip (an API server restarting): made again (a list after
// the backoff, a watch once a second) until none has answered for grace (reach; 0: until the
// timeout); then wait ends as at the first read, exit 1, "cannot reach the cluster: ..." with
// what it last saw, rather than wait out the timeout. An error the API server answers with (a
// 5xx, a 429), from the first read on, is made again until the timeout: it is there. A request
// whose credentials cannot be had, or whose cluster's certificate is not trusted (connectError),
// ends it at once, from the first read on: waiting does not mend either.
func (v *vmClient) wait(ctx context.Context, name string, w waitFor, what string, timeout, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx, gone := context.WithCancelCause(ctx)
	defer gone(nil)
	cut := newReach(grace, v.now, gone)
	defer cut.stop()
	ctx = withAttemptObserver(ctx, cut)
	var last schema.VirtualMachine // as the VM was last seen
	var seen bool                  // whether last is the VM as read, not the zero view
	var lastErr error
	delay := waitBackoff.DelayWithReset(clock.RealClock{}, waitBackoffReset)
	err := delay.Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		vm, rv, err := v.list(ctx, name)
		if err != nil {
			var unreached *unreachableError
			var refused cli.ExitCoder
			switch {
			case ctx.Err() != nil:
				return false, err
			case errors.As(err, &unreached) && seen:
				// A blip: the cluster was there. Made again after the backoff, until
				// reach takes the cluster for gone.
				cut.failed(unreached.err)
			case errors.As(err, &refused):
				// A refusal, or a first read that got no answer (readError says both).
				return false, err
			default:
				cut.answered() // an error the API server answered with
			}
			lastErr = err
			return false, nil
		}
		cut.begin()
		if last, seen = vm, true; w.met(vm) {
			return true, nil
		}
		gone, err := v.watchUntil(ctx, name, rv, w, &last, &lastErr, cut)
		var refused cli.ExitCoder
		switch {
		case err == nil && gone:
			return false, cli.Exit(fmt.Sprintf("virtualmachine %q was deleted while waiting for %s; last seen: %s", name, what, lastSeen(last, w)), 1)
		case err == nil:
			return true, nil
		case ctx.Err() != nil:
			return false, ctx.Err()
		case apierrors.IsForbidden(err):
			return false, cli.Exit(fmt.Sprintf("cannot watch virtualmachine %q in namespace %q: forbidden (%s)", name, v.namespace, apiMessage(err)), 1)
		case apierrors.IsUnauthorized(err):
			return false, cli.Exit(fmt.Sprintf("cannot watch virtualmachine %q in namespace %q: unauthorized (%s)", name, v.namespace, apiMessage(err)), 1)
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			// 410: the watch fell behind the history the API server keeps. Listing again
			// and watching from there is the way on, as a reflector does; not an error.
			return false, nil
		case errors.As(err, &refused):
			return false, err // a credential, a certificate (connectError)
		}
		// The watch could not go on: after the backoff, list the VM again and watch from there.
		lastErr = err
		return false, nil
	})
	var unreached *unreachableError
	switch {
	case err == nil:
		fmt.Fprintf(v.out, "virtualmachine/%s condition met (%s; %s)\n", name, what, describe(last.Status()))
		return nil
	case errors.As(context.Cause(ctx), &unreached):
		// The cluster gone for the grace, whatever the list or watch then under way ended on.
		return &unreachableError{err: unreached.err, note: fmt.Sprintf("for %s while waiting for %s of virtualmachine/%s; last seen: %s",
			grace, what, name, lastSeen(last, w))}
	case ctx.Err() != nil && !seen:
		msg := fmt.Sprintf("timed out after %s waiting for %s of virtualmachine/%s, which it never read", timeout, what, name)
		if lastErr != nil {
			msg += fmt.Sprintf(" (last error: %v)", lastErr)
		}
		return cli.Exit(msg, 1)
	case ctx.Err() != nil:
		msg := fmt.Sprintf("timed out after %s waiting for %s of virtualmachine/%s; last seen: %s", timeout, what, name, lastSeen(last, w))
		if lastErr != nil {
			msg += fmt.Sprintf(" (last error: %v)", lastErr)
		}
		return cli.Exit(msg, 1)
	}
	return err
}

// nameSelector is the field selector of the VM named name, for its list and its watch.
func nameSelector(name string) string {
	return fields.OneTermEqualSelector("metadata.name", name).String()
}

// list reads the VM named name, as get does, by a list of that one name, and returns with it
// the list's resourceVersion: the API server's present, where a watch can start. The VM's own
// resourceVersion is that of its last change, which for a VM nobody touched for a while is
// older than the history the API server keeps, and a watch from it ends at once with 410 Gone.
func (v *vmClient) list(ctx context.Context, name string) (schema.VirtualMachine, string, error) {
	l, err := v.vms.List(ctx, metav1.ListOptions{FieldSelector: nameSelector(name)})
	if err != nil {
		return schema.VirtualMachine{}, "", v.readError(name, err)
	}
	for _, u := range l.Items {
		if u.GetName() != name {
			continue
		}
		raw, err := u.MarshalJSON()
		if err != nil {
			return schema.VirtualMachine{}, "", fmt.Errorf("read virtualmachine %s: %w", name, err)
		}
		return schema.ViewOf(raw, u.GetResourceVersion(), v.fields), l.GetResourceVersion(), nil
	}
	return schema.VirtualMachine{}, "", v.readError(name, apierrors.NewNotFound(v.gvr.GroupResource(), name))
}

// watchUntil watches the VM from resourceVersion rv, keeping its latest view in last, until
// w holds (nil error), the VM is deleted (gone) or the watch cannot go on (an error: the API
// server's own when it sent one, for the caller to tell a refusal, or a resourceVersion the
// API server no longer holds, from the rest). A watch that ends or fails otherwise (it
// expired, the connection went, the API server was busy) is made again from the latest
// resourceVersion it saw, bookmarks included, at most once a second (client-go's
// RetryWatcher); the error of each watch that could not be made is kept in lastErr. Each
// watch's answers, failures and time held open count in cut, which ends the wait's context
// once the cluster is taken for gone: the RetryWatcher would make the watch again until the
// timeout. One whose credentials cannot be had, or whose cluster's certificate is not trusted
// (connectError), ends it at once: the RetryWatcher would make that one again until the
// timeout too, and waiting does not mend it.
func (v *vmClient) watchUntil(ctx context.Context, name, rv string, w waitFor, last *schema.VirtualMachine, lastErr *error, cut *reach) (gone bool, err error) {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = nameSelector(name)
		wi, err := v.vms.Watch(ctx, o)
		if err == nil {
			return holdWatch(wi, cut), nil
		}
		why := unanswered(err)
		var unreached *unreachableError
		switch {
		case ctx.Err() != nil:
			// Stopped, or past the timeout: not the cluster's failure.
		case why == nil:
			cut.answered() // an error the API server answered with
			*lastErr = err
		case errors.As(why, &unreached):
			*lastErr = why
			cut.failed(unreached.err)
		default:
			stop(why)
		}
		return nil, err
	}}
	// The RetryWatcher logs each watch it makes again through klog, on stderr by default; what
	// the user needs is in wait's own line.
	rw, err := watchtools.NewRetryWatcherWithContext(klog.NewContext(ctx, klog.Logger{}), rv, lw)
	if err != nil {
		return false, err
	}
	defer func() {
		rw.Stop()
		<-rw.Done() // its last write of lastErr comes before wait reads it
	}()
	_, err = watchtools.UntilWithoutRetry(ctx, rw, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Deleted:
			gone = true
			return true, nil
		case watch.Added, watch.Modified:
			u, ok := ev.Object.(interface{ MarshalJSON() ([]byte, error) })
			if !ok {
				return false, nil
			}
			raw, err := u.MarshalJSON()
			if err != nil {
				return false, nil
			}
			*last = schema.ViewOf(raw, "", v.fields)
			return w.met(*last), nil
		case watch.Error:
			return false, fmt.Errorf("the watch ended with an error: %w", apierrors.FromObject(ev.Object))
		}
		return false, nil
	})
	return gone, watchEnd(ctx, err)
}

// watchEnd is why watchUntil's watch ended, err being UntilWithoutRetry's: nil when w held or
// the VM went; when the watch's context ended, its cause (wait's timeout, the cluster taken
// for gone: unreachableError, a failure no retry mends: connectError), whichever of "context
// done" and the RetryWatcher's closed channel UntilWithoutRetry met first, as the RetryWatcher
// closes it when the context ends; else the watch's own end, which wait lists again after.
// Were the closed channel checked first, a wait whose cluster is gone would take it, when
// UntilWithoutRetry found both ready, for a watch that ended, and list again after the backoff.
func watchEnd(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.Is(err, watchtools.ErrWatchClosed):
		return errors.New("the watch ended")
	}
	return err
}

// heldWatch is a watch of the API server's, passed on to the RetryWatcher, that tells reach
// of it (holdWatch).
type heldWatch struct {
	in   watch.Interface
	out  chan watch.Event
	done chan struct{}
	once sync.Once
}

// holdWatch is in, told to r: held open from now, each event and bookmark an answer, and its
// end one too once it stayed open waitHeld (reach says why). Error events are not counted:
// client-go makes one of a stream it cannot read.
func holdWatch(in watch.Interface, r *reach) watch.Interface {
	w := &heldWatch{in: in, out: make(chan watch.Event), done: make(chan struct{})}
	r.hold()
	opened := r.now()
	go func() {
		defer close(w.out)
		// Released before its channel closes, so before the RetryWatcher makes the next.
		defer func() { r.release(r.now().Sub(opened)) }()
		for {
			select {
			case ev, ok := <-in.ResultChan():
				if !ok {
					return
				}
				if ev.Type != watch.Error {
					r.answered()
				}
				select {
				case w.out <- ev:
				case <-w.done:
					return
				}
			case <-w.done:
				return
			}
		}
	}()
	return w
}

func (w *heldWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *heldWatch) Stop() {
	w.once.Do(func() {
		close(w.done)
		w.in.Stop()
	})
}

// lastSeen is the phase, reason and message of the VM's status, for wait's timeout, and
// whether the status did not yet describe the VM as it is (waitFor.met). A wait for phase
// Inactive that saw that phase with the server not gone yet (serverLeft) says what it still
// waits for: "phase Inactive" alone would read as the phase it asked for.
func lastSeen(vm schema.VirtualMachine, w waitFor) string {
	st := vm.Status()
	s := describe(st)
	if w.phase == schema.PhaseInactive && serverLeft(st) {
		server := "its server"
		if st.Server != nil && st.Server.Name != "" {
			server += " " + st.Server.Name
		}
		if st.Reason == decision.ReasonNodeLost {
			s = fmt.Sprintf("phase Inactive, but %s may still run: its node does not answer (%s)", server, st.Reason)
		} else {
			s = fmt.Sprintf("phase Inactive, but %s is still stopping (%s)", server, st.Reason)
		}
	}
	if st.Message != "" {
		s += ": " + st.Message
	}
	switch {
	case vm.Paused():
		s += fmt.Sprintf(" (paused: the controller acts on nothing of the VM until the annotation %s goes)", schema.AnnotationPaused)
	case pausedStatus(st):
		s += " (resumed: the controller has yet to report on the VM again)"
	case st.Phase != "" && !current(vm):
		s += " (the controller has yet to act on a request or a spec change of the VM)"
	}
	return s
}

func statusCommand(c *pluginConfig, version string) *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "say where a VM stands: phase, reason, message, server, node, IP, disk, conditions",
		ArgsUsage: "NAME",
		Description: "Reads the VM, and its server's pod for the node and IP; where the pod cannot be read (the user may not read pods) " +
			"or has none yet, the node and IP the VM's status reports, with a line Pod: saying why the pod was not read.",
		Flags: c.flags(),
		Action: action(c, oneName, func(cc *cli.Context) error {
			v, name, err := c.connect(cc, version)
			if err != nil {
				return err
			}
			return v.status(cc.Context, name)
		}),
	}
}

// status prints where the VM name stands (writeStatus).
func (v *vmClient) status(ctx context.Context, name string) error {
	_, vm, err := v.get(ctx, name)
	if err != nil {
		return err
	}
	at, err := v.where(ctx, vm.Status())
	if err != nil {
		return err
	}
	writeStatus(v.out, vm, v.namespace, at)
	return nil
}

// serverPlace is where a VM's server runs, for status: its node and IP, and, when its pod
// could not be read, why (one line).
type serverPlace struct {
	node, ip string
	podError string
}

// where is where the server st names runs: its pod's node and IP, read now, which are the
// freshest; where the pod has none yet, or cannot be read (a user who may not read pods, a pod
// gone meanwhile), those the controller last reported in the VM's status (status.server.node
// and status.server.ip, where the layout has them), as kubectl get vm -o wide shows them, and
// why the pod was not read: without it, a user who may not read pods would see no node and no
// IP, and no reason. A read of the pod that gets no answer is status's error, as it is every
// verb's (unanswered), not a line Pod: status would exit 0 with the cluster gone said in one
// field of its output.
func (v *vmClient) where(ctx context.Context, st schema.Status) (serverPlace, error) {
	if st.Server == nil {
		return serverPlace{}, nil
	}
	p := serverPlace{node: st.Server.Node, ip: st.Server.IP}
	if st.Server.Name == "" {
		return p, nil
	}
	pod, err := v.kube.CoreV1().Pods(v.namespace).Get(ctx, st.Server.Name, metav1.GetOptions{})
	if err != nil {
		if why := unanswered(err); why != nil {
			return serverPlace{}, why
		}
		p.podError = v.lookupError("the server pod "+st.Server.Name, err).Error()
		return p, nil
	}
	if pod.Spec.NodeName != "" {
		p.node = pod.Spec.NodeName
	}
	if pod.Status.PodIP != "" {
		p.ip = pod.Status.PodIP
	}
	return p, nil
}

// writeStatus prints a VM's status in the manner of kubectl describe: a field per line, then
// the conditions as a table.
func writeStatus(out io.Writer, vm schema.VirtualMachine, namespace string, at serverPlace) {
	st := vm.Status()
	spec, _ := vm.Spec()
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	line := func(k, v string) {
		if v == "" {
			v = "<none>"
		}
		fmt.Fprintf(tw, "%s:\t%s\n", k, v)
	}
	line("Name", vm.Name())
	line("Namespace", namespace)
	line("Run strategy", string(spec.RunStrategy))
	line("Phase", string(st.Phase))
	line("Reason", st.Reason)
	line("Message", st.Message)
	server := ""
	if st.Server != nil && st.Server.Name != "" {
		server = fmt.Sprintf("%s (%s)", st.Server.Name, st.Server.State)
	}
	line("Server", server)
	line("Node", at.node)
	line("IP", at.ip)
	if at.podError != "" {
		line("Pod", at.podError+"; node and IP as the VM's status reports them")
	}
	disk := ""
	if d := st.RootDisk; d != nil {
		disk = strings.TrimSpace(fmt.Sprintf("%s %s %s", d.ClaimName, d.Phase, d.Capacity))
	}
	line("Disk", disk)
	if !st.NextRetryTime.IsZero() {
		line("Next try", st.NextRetryTime.Format(time.RFC3339))
	}
	if st.ConsecutiveFailures > 0 {
		line("Failures", fmt.Sprint(st.ConsecutiveFailures))
	}
	if len(st.Conditions) == 0 {
		line("Conditions", "") // aligned with the lines above
		tw.Flush()
		return
	}
	tw.Flush()
	fmt.Fprintln(out, "Conditions:")
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  Type\tStatus\tReason\tMessage")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	tw.Flush()
}
