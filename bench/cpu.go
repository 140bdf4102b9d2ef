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

// cpuSnapshot is the CPU seconds (user and system) of every process, summed by command name.
type cpuSnapshot struct {
	at  time.Time
	sec map[string]float64
}

// takeCPU reads /proc. Processes that end between two snapshots leave their CPU out.
func takeCPU() cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), sec: map[string]float64{}}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses, so split at the
		// last ')'.
		line := string(b)
		open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(line[end+1:])
		if len(fields) < 13 {
			continue
		}
		utime, err1 := strconv.ParseFloat(fields[11], 64)
		stime, err2 := strconv.ParseFloat(fields[12], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		s.sec[line[open+1:end]] += (utime + stime) / clockTick
	}
	return s
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
	for name, sec := range after.sec {
		if d := sec - before.sec[name]; d >= 0.05 {
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
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("read VmHWM of process %d: %w", pid, err)
			}
			return kb * 1024 / 1e6, nil
		}
	}
	return 0, fmt.Errorf("process %d has no VmHWM", pid)
}
