package main

import (
	"maps"
	"testing"
)

// TestParseStat: the fields after a comm with spaces and parentheses are found, and a line
// that is not a stat line is refused.
func TestParseStat(t *testing.T) {
	line := "4242 (vm (con) troller) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 12 0 987654 0 0"
	k, c, ok := parseStat(line)
	if !ok || k != (procKey{4242, 987654}) || c.name != "vm (con) troller" || c.sec != 3 {
		t.Errorf("parseStat = %+v, %+v, %v; want pid 4242 started at 987654, vm (con) troller, 3 s", k, c, ok)
	}
	for _, bad := range []string{"", "4242 vm-controller S 1", "x (a) S 1 2 3", "4242 (a) S 1 2 3 4"} {
		if _, _, ok := parseStat(bad); ok {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

// TestCPUSince: CPU is taken process by process. A kernel worker that renamed itself counts
// only what it used in between; a process started in between counts whole, also on a reused
// pid; one that ended is left out.
func TestCPUSince(t *testing.T) {
	before := cpuSnapshot{procs: map[procKey]procCPU{
		{10, 1}: {"kworker/1:1-mm_percpu_wq", 300},
		{20, 5}: {"kube-apiserver", 100},
		{30, 7}: {"vm-controller", 40}, // stopped, and its pid reused below
		{40, 8}: {"etcd", 9},
	}}
	after := cpuSnapshot{procs: map[procKey]procCPU{
		{10, 1}: {"kworker/1:1-events", 300.5},
		{11, 2}: {"kworker/0:2-events", 0.25},
		{20, 5}: {"kube-apiserver", 102.5},
		{30, 9}: {"vm-controller", 1.5},
		{40, 8}: {"etcd", 9},
	}}
	want := map[string]float64{"kworker": 0.75, "kube-apiserver": 2.5, "vm-controller": 1.5}
	if got := after.since(before); !maps.Equal(got, want) {
		t.Errorf("since = %v, want %v", got, want)
	}
}
