package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
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
		rootDisks         string // "": ephemeral, the default
		wantRootDisks     []string
	}{
		{"claims and ephemeral", func(*compareFlags) {}, "warnings", "0", "", []string{"warnings"}, []int{0}, "claim,ephemeral", []string{"claim", "ephemeral"}},
		{"unknown root disk", func(*compareFlags) {}, "warnings", "0", "--root-disk", nil, nil, "claim,pvc", nil},
		{"defaults", func(*compareFlags) {}, "warnings", "0", "", []string{"warnings"}, []int{0}, "", nil},
		{"both variants, the peer twice", func(f *compareFlags) { f.gomaxprocs = 1 }, "warnings,all", "0,1", "", []string{"warnings", "all"}, []int{0, 1}, "", nil},
		{"unknown events", func(*compareFlags) {}, "warnings,none", "0", "--events", nil, nil, "", nil},
		{"negative GOMAXPROCS", func(f *compareFlags) { f.gomaxprocs = -1 }, "warnings", "0", "--gomaxprocs", nil, nil, "", nil},
		{"peer GOMAXPROCS not a number", func(*compareFlags) {}, "warnings", "0,x", "--peer-gomaxprocs", nil, nil, "", nil},
		{"negative peer GOMAXPROCS", func(*compareFlags) {}, "warnings", "-2", "--peer-gomaxprocs", nil, nil, "", nil},
		{"empty peer GOMAXPROCS", func(*compareFlags) {}, "warnings", "", "--peer-gomaxprocs", nil, nil, "", nil},
		{"no VMs", func(f *compareFlags) { f.vms = 0 }, "warnings", "0", "--vms", nil, nil, "", nil},
		{"no clients", func(f *compareFlags) { f.clients = 0 }, "warnings", "0", "--clients", nil, nil, "", nil},
		{"no workers", func(f *compareFlags) { f.workers = 0 }, "warnings", "0", "--workers", nil, nil, "", nil},
		{"no repetitions", func(f *compareFlags) { f.reps = 0 }, "warnings", "0", "--reps", nil, nil, "", nil},
		{"negative settle", func(f *compareFlags) { f.settle = -time.Second }, "warnings", "0", "--settle", nil, nil, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.change(&f)
			if tc.rootDisks == "" {
				tc.rootDisks = "ephemeral"
				if tc.want == "" && tc.wantRootDisks == nil {
					tc.wantRootDisks = []string{"ephemeral"}
				}
			}
			err := f.parse(tc.events, tc.peerProcs, tc.rootDisks)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("parse: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("parse: %v, want an error naming %s", err, tc.want)
			case tc.want != "":
				return
			}
			if !slices.Equal(f.events, tc.wantEvents) || !slices.Equal(f.peerGOMAXPROCS, tc.wantPeerProcs) || !slices.Equal(f.rootDisks, tc.wantRootDisks) {
				t.Errorf("events %q, peer GOMAXPROCS %v, root disks %q; want %q, %v, %q", f.events, f.peerGOMAXPROCS, f.rootDisks,
					tc.wantEvents, tc.wantPeerProcs, tc.wantRootDisks)
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

// TestBurstRecord: a burst's record takes the per-VM times from the watch (from the start of
// each create to its first Active, and from the first create), the CPU by process, and the
// API server's writes of the controller's kinds per VM, 409s among them and counted apart.
func TestBurstRecord(t *testing.T) {
	start := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	w := &vmWatch{createAt: map[string]time.Time{}, activeAt: map[string]time.Time{}}
	for i, created := range []time.Duration{0, 10, 20, 30} {
		w.createAt[vmName(i)] = start.Add(created * time.Millisecond)
	}
	for i, active := range []time.Duration{1500, 900, 2000} { // vm-00003 never Active
		w.activeAt[vmName(i)] = start.Add(active * time.Millisecond)
	}
	sample := func(resource, sub, verb, code string) string {
		return `apiserver_request_total{code="` + code + `",component="apiserver",group="",resource="` + resource +
			`",scope="resource",subresource="` + sub + `",verb="` + verb + `",version="v1"}`
	}
	before := map[string]float64{sample("pods", "", "POST", "201"): 10}
	after := map[string]float64{
		sample("pods", "", "POST", "201"):                   14,
		sample("pods", "", "POST", "409"):                   2,
		sample("virtualmachines", "status", "PATCH", "200"): 8,
		sample("virtualmachines", "", "POST", "201"):        4, // the bench's own creates: not the controller's
		sample("pods", "binding", "POST", "201"):            4, // the scheduler's
		`apiserver_request_total{code="200",verb="PATCH"}`:  99,
	}
	b := w.burstRecord(0, 4, start, 2*time.Second, 0.5, map[string]float64{"kube-apiserver": 3, "etcd": 1}, before, after)
	if b.VMs != 4 || b.VMsPerSec != 2 || b.ControllerCPU != 0.5 || b.APIServerCPU != 3 || b.MachineCPU != 4 {
		t.Errorf("burst = %+v, want 4 VMs, 2 VMs/s, CPU 0.5 / 3 / 4", b)
	}
	if want := []int64{890, 1500, 1980}; !slices.Equal(b.LatenciesMS, want) {
		t.Errorf("latencies %v, want %v", b.LatenciesMS, want)
	}
	if want := []int64{900, 1500, 2000}; !slices.Equal(b.ActiveMS, want) {
		t.Errorf("Active times %v, want %v", b.ActiveMS, want)
	}
	if b.P50 != 1.5 || b.Max != 1.98 {
		t.Errorf("p50 %v s, max %v s; want 1.5, 1.98", b.P50, b.Max)
	}
	if want := map[string]float64{"pods POST": 1.5, "virtualmachines/status PATCH": 2}; !maps.Equal(b.WritesPerVM, want) || b.ConflictsPerVM != 0.5 {
		t.Errorf("writes per VM %v, conflicts %v; want %v, 0.5", b.WritesPerVM, b.ConflictsPerVM, want)
	}
}

// TestTeardownRecord: a teardown's figures per VM are the API server's writes of VMs (the
// controller's alone on their way out; pods are deleted by others too), the 409s among them,
// and the retries the controller's queues counted, whichever framework labels them; the
// refused writes are each kind's 4xx answers, for what the retries were for.
func TestTeardownRecord(t *testing.T) {
	sample := func(resource, sub, verb, code string) string {
		return `apiserver_request_total{code="` + code + `",component="apiserver",group="cloudnative.czs",resource="` + resource +
			`",scope="resource",subresource="` + sub + `",verb="` + verb + `",version="v1alpha1"}`
	}
	apiBefore := map[string]float64{sample("virtualmachines", "", "PATCH", "200"): 100, sample("virtualmachines", "", "PATCH", "409"): 3}
	apiAfter := map[string]float64{
		sample("virtualmachines", "", "PATCH", "200"):            108, // 8 finalizers released
		sample("virtualmachines", "", "PATCH", "409"):            7,   // 4 refused
		sample("virtualmachines", "status", "PATCH", "200"):      8,   // 8 Terminating
		sample("pods", "", "DELETE", "200"):                      16,  // the namespace controller's and kwok's too
		sample("pods", "", "DELETE", "409"):                      2,
		sample("virtualmachines", "", "DELETECOLLECTION", "200"): 1,
	}
	// vm-controller's queue and controller-runtime's, as each labels it.
	ctrlBefore := map[string]float64{`workqueue_retries_total{name="virtualmachines"}`: 1}
	ctrlAfter := map[string]float64{`workqueue_retries_total{name="virtualmachines"}`: 5, `workqueue_retries_total{controller="virtualmachine",name="virtualmachine"}`: 2}
	refused := refusedWrites(apiBefore, apiAfter)
	if want := map[string]float64{"virtualmachines PATCH 409": 4, "pods DELETE 409": 2}; !maps.Equal(refused, want) {
		t.Errorf("refused writes %v, want %v", refused, want)
	}
	got := teardownRecord(8, apiBefore, apiAfter, ctrlBefore, ctrlAfter)
	want := map[string]float64{"virtualmachines PATCH": 1.5, "virtualmachines/status PATCH": 1}
	if !maps.Equal(got.WritesPerVM, want) || got.ConflictsPerVM != 0.5 || got.RetriesPerVM != 0.75 {
		t.Errorf("teardown %+v, want writes %v, 0.5 conflicts, 0.75 retries per VM", got, want)
	}
}
