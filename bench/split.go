// The split command: where a controller's CPU profile went, in parts that say who could make it
// smaller. The benchmarks page's "profile of what is left" is this command's table, so that
// the page's claims about what the controller could still cut are read from profiles with
// one set of rules, the peer's and vm-controller's alike, and not sorted by hand.

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/pprof/profile"
)

// part is one row of the split: a name, and whether it is the Go runtime's, the transport's
// or client-go's (lib), which a controller that sends the same requests over client-go pays
// too, or the decoding and code that are the controller's own to make smaller. The garbage
// collector and the scheduler are counted with the first although they move with the
// controller's own allocations and hand-offs: a sample of theirs cannot say whose they were.
type part struct {
	name string
	lib  bool
}

// The parts, in the order of the table. A sample goes to the first part whose rule its stack
// matches (parts below).
var (
	partGC        = part{"the Go runtime: garbage collection", true}
	partScheduler = part{"the Go runtime: scheduler", true}
	partWire      = part{"the transport: TLS, syscalls, network poller, wake-ups", true}
	partHTTP      = part{"the transport: net/http's connection loops", true}
	partRequests  = part{"client-go: building requests, reading answers", true}
	partInformers = part{"client-go: informers, watches and queues", true}
	partWatch     = part{"decoding and caching watch events", false}
	partAnswers   = part{"decoding write answers", false}
	partReads     = part{"reading objects in reconciles", false}
	partLibraries = part{"other libraries (controller-runtime, apimachinery)", false}
	partOwn       = part{"the controller's own code", false}
	partOther     = part{"other", false}
)

var partOrder = []part{partGC, partScheduler, partWire, partHTTP, partRequests, partInformers,
	partWatch, partAnswers, partReads, partLibraries, partOwn, partOther}

// decoders are the functions whose presence in a stack makes a sample decoding: gjson, the
// generated protobuf code, encoding/json and the unstructured converter, and the controller's
// own readers of watch frames and write answers.
var decoders = []string{
	"github.com/tidwall/gjson.", ").Unmarshal", "google.golang.org/protobuf/encoding/protowire.",
	"encoding/json.", "sigs.k8s.io/json.", "k8s.io/apimachinery/pkg/runtime.(*unstructuredConverter)",
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured.",
	"vm-controller/watchframe.", "vm-controller/reconcile/vmcache.", "vm-controller/backend/pods.unmarshalPod",
	"vm-controller/backend/pods.cachePod", "vm-controller/backend/pods.(*podFormat)", "vm-controller/backend/pods.toCachedPod",
}

// ownCode tells the controllers' own frames: vm-controller's module, and the peer's package
// main.
func ownCode(fn string) bool {
	return strings.HasPrefix(fn, "github.com/cloudnative-czs/vm-controller/") || strings.HasPrefix(fn, "main.")
}

// classify returns the part of a sample whose stack holds the functions fns, leaf first.
func classify(fns []string) part {
	// some reports whether a function of the stack matches one of subs.
	some := func(match func(fn, sub string) bool, subs ...string) bool {
		for _, fn := range fns {
			for _, sub := range subs {
				if match(fn, sub) {
					return true
				}
			}
		}
		return false
	}
	has := func(subs ...string) bool { return some(strings.Contains, subs...) }
	hasPrefix := func(prefixes ...string) bool { return some(strings.HasPrefix, prefixes...) }
	own := false
	for _, fn := range fns {
		own = own || ownCode(fn)
	}
	switch {
	case hasPrefix("runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcAssistAlloc", "runtime.GC"):
		return partGC
	case hasPrefix("runtime.schedule", "runtime.findRunnable", "runtime.mcall", "runtime.park_m", "runtime.stopm", "runtime.sysmon"):
		return partScheduler
	case hasPrefix("crypto/tls.", "internal/poll.", "syscall.", "runtime.netpoll", "runtime.futex", "runtime.notewakeup", "runtime.entersyscall"):
		return partWire
	case hasPrefix("net/http.") && !own && !hasPrefix("k8s.io/client-go/rest."):
		return partHTTP
	case has(decoders...):
		switch {
		case hasPrefix("k8s.io/apimachinery/pkg/watch.(*StreamWatcher)", "k8s.io/client-go/tools/cache."):
			return partWatch
		case has("vm-controller/reconcile/vmcache.Answer", "k8s.io/client-go/rest.Result.Into", "k8s.io/client-go/rest.(*Request).transformResponse"):
			return partAnswers
		}
		return partReads
	case hasPrefix("k8s.io/client-go/rest.", "net/http."):
		return partRequests // the request path, client-go's metric hooks included
	// What a controller's code calls is its own, client-go's cache and queue among it (an
	// event handler, a reconcile's read of the cache); what runs under an informer or a
	// queue with none of its code on the stack is client-go's.
	case own:
		return partOwn
	case hasPrefix("sigs.k8s.io/controller-runtime/"):
		return partLibraries
	case hasPrefix("k8s.io/client-go/tools/cache.", "k8s.io/apimachinery/pkg/watch.", "k8s.io/client-go/util/workqueue."):
		return partInformers
	case hasPrefix("k8s.io/", "sigs.k8s.io/"):
		return partLibraries
	}
	return partOther
}

// split is one profile's CPU by part, in seconds.
type split struct {
	name    string
	seconds map[part]float64
	total   float64
}

// splitProfile reads a CPU profile and sums its samples by part.
func splitProfile(path string) (split, error) {
	f, err := os.Open(path)
	if err != nil {
		return split{}, fmt.Errorf("split: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return split{}, fmt.Errorf("split %s: %w", path, err)
	}
	value := -1 // the sample value that is CPU time
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			value = i
		}
	}
	if value < 0 {
		return split{}, fmt.Errorf("split %s: not a CPU profile (no cpu/nanoseconds sample type)", path)
	}
	name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".pprof"), ".pb.gz")
	s := split{name: name, seconds: map[part]float64{}}
	var fns []string
	for _, smp := range p.Sample {
		fns = fns[:0]
		for _, loc := range smp.Location {
			for _, line := range loc.Line { // inlined frames first, as pprof lists them
				if line.Function != nil {
					fns = append(fns, line.Function.Name)
				}
			}
		}
		sec := float64(smp.Value[value]) / 1e9
		s.seconds[classify(fns)] += sec
		s.total += sec
	}
	return s, nil
}

// splitCommand prints the split of each CPU profile named, side by side: go -C bench run . split
// FILE...
func splitCommand(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("split: name CPU profiles (go -C bench run . split /tmp/p/vm-controller-rep1.pprof /tmp/p/controller-runtime_peer-rep1.pprof)")
	}
	var splits []split
	for _, path := range args {
		s, err := splitProfile(path)
		if err != nil {
			return err
		}
		splits = append(splits, s)
	}
	writeSplit(out, splits)
	return nil
}

// writeSplit writes the splits as a markdown table, a column per profile, and under it each
// profile's total and its runtime, transport and client-go parts against each other's
// total.
func writeSplit(w io.Writer, splits []split) {
	fmt.Fprint(w, "| where the CPU went | runtime, transport, client-go |")
	for _, s := range splits {
		fmt.Fprintf(w, " %s |", s.name)
	}
	fmt.Fprint(w, "\n|---|---|")
	for range splits {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	row := func(name, lib string, v func(split) float64) {
		fmt.Fprintf(w, "| %s | %s |", name, lib)
		for _, s := range splits {
			fmt.Fprintf(w, " %.2f s (%.0f%%) |", v(s), 100*v(s)/max(s.total, 1e-9))
		}
		fmt.Fprintln(w)
	}
	for _, p := range partOrder {
		lib := ""
		if p.lib {
			lib = "yes"
		}
		row(p.name, lib, func(s split) float64 { return s.seconds[p] })
	}
	row("**runtime, transport, client-go**", "", libSeconds)
	row("**total**", "", func(s split) float64 { return s.total })
	if len(splits) < 2 {
		return
	}
	fmt.Fprintln(w)
	for i, s := range splits {
		for j, o := range splits {
			if i != j && o.total > 0 {
				fmt.Fprintf(w, "- %s: %.2fx the CPU of %s; its runtime, transport and client-go parts alone %.2fx.\n", s.name, s.total/o.total, o.name, libSeconds(s)/o.total)
			}
		}
	}
}

// libSeconds is the sum of a split's runtime, transport and client-go parts.
func libSeconds(s split) float64 {
	var sum float64
	for _, p := range partOrder {
		if p.lib {
			sum += s.seconds[p]
		}
	}
	return sum
}
