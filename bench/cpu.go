// CPU by process: where a stage's CPU went on the machine, so that a convergence figure can be
// read against the work of the cluster's own components that share the cores with the
// controller.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100 on Linux.
const clockTick = 100

// cpuSnapshot is the CPU seconds (user and system) of every process, by process.
type cpuSnapshot struct {
	at    time.Time
	procs map[procKey]procCPU
}

// procKey tells processes apart over time: a pid, and when it started (a pid is reused).
type procKey struct {
	pid   int
	start uint64 // clock ticks after boot
}

// procCPU is one process's name (its comm) and the CPU seconds it has used.
type procCPU struct {
	name string
	sec  float64
}

// takeCPU reads /proc. Processes that end between two snapshots leave their CPU out.
func takeCPU() cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), procs: map[procKey]procCPU{}}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if k, c, ok := parseStat(string(b)); ok {
			s.procs[k] = c
		}
	}
	return s
}

// parseStat reads a /proc/PID/stat line: pid (comm) state ppid ... utime stime ... starttime.
// comm may hold spaces and parentheses, so the fields after it start at the last ')'.
func parseStat(line string) (procKey, procCPU, bool) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return procKey{}, procCPU{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	fields := strings.Fields(line[end+1:])
	if err != nil || len(fields) < 20 {
		return procKey{}, procCPU{}, false
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	start, err3 := strconv.ParseUint(fields[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procKey{}, procCPU{}, false
	}
	return procKey{pid, start}, procCPU{line[open+1 : end], (utime + stime) / clockTick}, true
}

// since is the CPU used between before and s, summed by command name. It is taken process by
// process, and a process started in between counts whole. By name alone, a kernel worker
// that renamed itself after its current work item (kworker/1:1-events) counted as new, with
// all the CPU of its life. Kernel workers are summed as one name, kworker.
func (s cpuSnapshot) since(before cpuSnapshot) map[string]float64 {
	used := map[string]float64{}
	for k, p := range s.procs {
		d := p.sec - before.procs[k].sec
		if d <= 0 {
			continue
		}
		name := p.name
		if strings.HasPrefix(name, "kworker/") {
			name = "kworker"
		}
		used[name] += d
	}
	return used
}

// printCPU prints the CPU each process used between two snapshots, largest first, with the
// share of what the machine's cores could give in that time.
func printCPU(title string, before, after cpuSnapshot) {
	wall := after.at.Sub(before.at).Seconds()
	type use struct {
		name string
		sec  float64
	}
	var uses []use
	var total float64
	for name, d := range after.since(before) {
		if d >= 0.05 {
			uses = append(uses, use{name, d})
			total += d
		}
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].sec > uses[j].sec })
	fmt.Printf("%s: %.1f CPU-s of %.1f available (%d cores x %.1f s):", title, total, wall*float64(runtime.NumCPU()), runtime.NumCPU(), wall)
	for _, u := range uses {
		fmt.Printf(" %s %.1f;", u.name, u.sec)
	}
	fmt.Println()
}

// processCPU is the user and system CPU seconds process pid has used so far.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU of process %d: %w", pid, err)
	}
	line := string(b)
	fields := strings.Fields(line[strings.LastIndexByte(line, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("read CPU of process %d: short stat line", pid)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("read CPU of process %d: bad stat line", pid)
	}
	return (utime + stime) / clockTick, nil
}

// peakRSS is the largest resident set process pid has had so far (VmHWM), in MB.
func peakRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	bytes, found, err := kBField(string(b), "VmHWM:")
	switch {
	case err != nil:
		return 0, fmt.Errorf("read VmHWM of process %d: %w", pid, err)
	case !found:
		return 0, fmt.Errorf("process %d has no VmHWM", pid)
	}
	return bytes / 1e6, nil
}

// kBField reads the first line of a /proc status or meminfo text that starts with name (such
// as "VmRSS:"), a value in kB, as bytes; found is false when no line does.
func kBField(text, name string) (bytes float64, found bool, err error) {
	for line := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, true, err
			}
			return kb * 1024, true, nil
		}
	}
	return 0, false, nil
}
