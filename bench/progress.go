// Progress of a long burst: a burst of as many VMs as the machine can hold runs for an hour or
// more, and its one closing line says neither where it slowed nor why. A line every --progress shows the curve
// and what the machine spent on each stretch of it, and a burst cut short by --timeout still
// leaves what it got through.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// progress prints a line every interval until the returned function is called: the VMs whose
// creates have started and those seen Active since it was called, the VMs that became
// Active in the interval, the controller's queue, the CPU by process over the interval and
// the memory of the largest processes and of the machine.
func (w *vmWatch) progress(c *controller, interval time.Duration) (stop func()) {
	done, wg := make(chan struct{}), sync.WaitGroup{}
	created0, active0 := w.createdCount(), w.active()
	wg.Go(func() {
		start, last, lastActive := time.Now(), takeCPU(), active0
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			now, active, created := takeCPU(), w.active(), w.createdCount()
			depth := "?"
			if m, err := c.scrape(); err == nil {
				depth = fmt.Sprintf("%.0f", queueDepth(m))
			}
			fmt.Printf("progress %s: %d created, %d Active (%.1f VMs/s over the last %s), queue %s\n",
				time.Since(start).Round(time.Second), created-created0, active-active0,
				float64(active-lastActive)/now.at.Sub(last.at).Seconds(), interval, depth)
			printCPU("  CPU", last, now)
			fmt.Printf("  memory: %s\n", memoryByProcess(5))
			last, lastActive = now, active
		}
	})
	return func() { close(done); wg.Wait() }
}

// active is how many VMs the watch has seen Active.
func (w *vmWatch) active() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.activeAt)
}

// createdCount is how many VMs' creates the bench has started.
func (w *vmWatch) createdCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.createAt)
}

// memoryByProcess is the machine's available memory and the resident memory of the top
// processes, summed by command name, largest first.
func memoryByProcess(top int) string {
	type use struct {
		name string
		mb   float64
	}
	byName := map[string]float64{}
	statuses, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, p := range statuses {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if name, mb, ok := parseRSS(string(b)); ok {
			byName[name] += mb
		}
	}
	var uses []use
	for n, mb := range byName {
		uses = append(uses, use{n, mb})
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].mb > uses[j].mb })
	var b strings.Builder
	fmt.Fprintf(&b, "available %s;", memAvailable())
	for _, u := range uses[:min(top, len(uses))] {
		fmt.Fprintf(&b, " %s %.0f MB;", u.name, u.mb)
	}
	return b.String()
}

// parseRSS reads a process's name and resident memory (VmRSS, in MB) from its
// /proc/PID/status; a kernel thread has no VmRSS.
func parseRSS(status string) (name string, mb float64, ok bool) {
	for line := range strings.SplitSeq(status, "\n") {
		if rest, found := strings.CutPrefix(line, "Name:"); found {
			name = strings.TrimSpace(rest)
			break
		}
	}
	bytes, found, err := kBField(status, "VmRSS:")
	if name == "" || !found || err != nil {
		return "", 0, false
	}
	return name, bytes / 1e6, true
}

// memAvailable is MemAvailable of /proc/meminfo, in GB, or "?" where it cannot be read.
func memAvailable() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	bytes, found, err := kBField(string(b), "MemAvailable:")
	if !found || err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f GB", bytes/1e9)
}
