package main

import (
	"slices"
	"strings"
	"testing"
)

// TestCompareFlagsParse: the lists become one contender each, and flags that would measure
// something else than they say are refused, with the flag named.
func TestCompareFlagsParse(t *testing.T) {
	ok := compareFlags{vms: 2000, clients: 32, workers: 16, reps: 3}
	tests := []struct {
		name              string
		change            func(*compareFlags)
		events, peerProcs string
		want              string // "" for valid
		wantEvents        []string
		wantPeerProcs     []int
	}{
		{"defaults", func(*compareFlags) {}, "warnings", "0", "", []string{"warnings"}, []int{0}},
		{"both variants, the peer twice", func(f *compareFlags) { f.gomaxprocs = 1 }, "warnings,all", "0,1", "", []string{"warnings", "all"}, []int{0, 1}},
		{"unknown events", func(*compareFlags) {}, "warnings,none", "0", "--events", nil, nil},
		{"negative GOMAXPROCS", func(f *compareFlags) { f.gomaxprocs = -1 }, "warnings", "0", "--gomaxprocs", nil, nil},
		{"peer GOMAXPROCS not a number", func(*compareFlags) {}, "warnings", "0,x", "--peer-gomaxprocs", nil, nil},
		{"negative peer GOMAXPROCS", func(*compareFlags) {}, "warnings", "-2", "--peer-gomaxprocs", nil, nil},
		{"empty peer GOMAXPROCS", func(*compareFlags) {}, "warnings", "", "--peer-gomaxprocs", nil, nil},
		{"no VMs", func(f *compareFlags) { f.vms = 0 }, "warnings", "0", "--vms", nil, nil},
		{"no clients", func(f *compareFlags) { f.clients = 0 }, "warnings", "0", "--clients", nil, nil},
		{"no workers", func(f *compareFlags) { f.workers = 0 }, "warnings", "0", "--workers", nil, nil},
		{"no repetitions", func(f *compareFlags) { f.reps = 0 }, "warnings", "0", "--reps", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.change(&f)
			err := f.parse(tc.events, tc.peerProcs)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("parse: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("parse: %v, want an error naming %s", err, tc.want)
			case tc.want != "":
				return
			}
			if !slices.Equal(f.events, tc.wantEvents) || !slices.Equal(f.peerGOMAXPROCS, tc.wantPeerProcs) {
				t.Errorf("events %q, peer GOMAXPROCS %v; want %q, %v", f.events, f.peerGOMAXPROCS, tc.wantEvents, tc.wantPeerProcs)
			}
		})
	}
}

// TestContenderGOMAXPROCS: a contender's environment sets GOMAXPROCS, or clears one the bench
// inherited so that Go's default applies; its name says which, where it is not Go's default
// or where the same controller runs with several.
func TestContenderGOMAXPROCS(t *testing.T) {
	if got := gomaxprocsEnv(0); !slices.Equal(got, []string{"GOMAXPROCS="}) {
		t.Errorf("gomaxprocsEnv(0) = %q, want it cleared", got)
	}
	if got := gomaxprocsEnv(1); !slices.Equal(got, []string{"GOMAXPROCS=1"}) {
		t.Errorf("gomaxprocsEnv(1) = %q", got)
	}
	for _, tc := range []struct {
		n      int
		always bool
		want   string
	}{{0, false, ""}, {0, true, " GOMAXPROCS=default"}, {1, false, " GOMAXPROCS=1"}, {4, true, " GOMAXPROCS=4"}} {
		if got := procsSuffix(tc.n, tc.always); got != tc.want {
			t.Errorf("procsSuffix(%d, %v) = %q, want %q", tc.n, tc.always, got, tc.want)
		}
	}
}

// TestProfileName: a profile's file name keeps what tells the contenders apart, and nothing a
// shell would trip on.
func TestProfileName(t *testing.T) {
	for contender, want := range map[string]string{
		"vm-controller --events warnings":              "vm-controller-events_warnings-rep2.pprof",
		"vm-controller --events warnings GOMAXPROCS=1": "vm-controller-events_warnings_GOMAXPROCS=1-rep2.pprof",
		"vm-controller@be404aa+changes --events all":   "vm-controller_be404aa_changes-events_all-rep2.pprof",
		"controller-runtime peer GOMAXPROCS=default":   "controller-runtime_peer_GOMAXPROCS=default-rep2.pprof",
	} {
		if got := profileName(contender, 2); got != want {
			t.Errorf("profileName(%q) = %q, want %q", contender, got, want)
		}
	}
}

// TestParseProcs: a GOMAXPROCS list is numbers of 0 or more; anything else names the flag.
func TestParseProcs(t *testing.T) {
	for list, want := range map[string][]int{"0": {0}, "0,1": {0, 1}, "1,0,4": {1, 0, 4}, "": nil, "1,": nil, "-1": nil, "one": nil} {
		got, err := parseProcs("--restart-gomaxprocs", list)
		switch {
		case want == nil && (err == nil || !strings.Contains(err.Error(), "--restart-gomaxprocs")):
			t.Errorf("parseProcs(%q) = %v, %v; want an error naming the flag", list, got, err)
		case want != nil && (err != nil || !slices.Equal(got, want)):
			t.Errorf("parseProcs(%q) = %v, %v; want %v", list, got, err, want)
		}
	}
}

// TestMedianOf: each figure's median is taken over the named contender's runs alone, figure
// by figure (a median run need not be any one run), and an even count averages the middle two.
func TestMedianOf(t *testing.T) {
	run := func(name string, vmsPerSec, cpu, api, machine float64) runResult {
		return runResult{contender: name, vms: 2000, vmsPerSec: vmsPerSec, cpuSec: cpu, apiCPUSec: api, machineCPUSec: machine,
			writes: map[string]float64{"pods POST": 1}}
	}
	all := []runResult{
		run("a", 80, 3.0, 20, 40),
		run("b", 10, 9.0, 90, 99),
		run("a", 90, 2.0, 24, 38),
		run("a", 70, 4.0, 22, 44),
		run("c", 60, 5.0, 30, 50),
		run("c", 62, 7.0, 34, 56),
	}
	m := medianOf("a", all)
	if m.contender != "a" || m.rep != 0 || m.vms != 2000 || m.vmsPerSec != 80 || m.cpuSec != 3.0 || m.apiCPUSec != 22 ||
		m.machineCPUSec != 40 || m.writes["pods POST"] != 1 {
		t.Errorf("medianOf(a) = %+v, want 80 VMs/s, 3.0 CPU-s, API server 22, machine 40, 1 pod create", m)
	}
	if m := medianOf("c", all); m.vmsPerSec != 61 || m.cpuSec != 6.0 || m.apiCPUSec != 32 || m.machineCPUSec != 53 {
		t.Errorf("medianOf(c) = %+v, want the middle two averaged: 61 VMs/s, 6.0, 32, 53", m)
	}
}
