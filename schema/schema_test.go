package schema

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseGVR(t *testing.T) {
	tests := map[string]struct {
		apiVersion, resource string
		want                 string // GVR.String(), or the start of the error
		ok                   bool
	}{
		"default":         {DefaultAPIVersion, DefaultResource, "cloudnative.czs/v1alpha1, Resource=virtualmachines", true},
		"other group":     {"compute.example.com/v1", "machines", "compute.example.com/v1, Resource=machines", true},
		"no slash":        {"v1alpha1", "virtualmachines", `api version "v1alpha1": want group/version`, false},
		"core group":      {"/v1", "virtualmachines", `api version "/v1": want group/version`, false},
		"two slashes":     {"a.b/v1/x", "virtualmachines", `api version "a.b/v1/x": want group/version`, false},
		"bad group":       {"Cloud_Native/v1", "virtualmachines", `api version "Cloud_Native/v1": group:`, false},
		"bad version":     {"cloudnative.czs/V1", "virtualmachines", `api version "cloudnative.czs/V1": version:`, false},
		"bad resource":    {DefaultAPIVersion, "Virtual.Machines", `resource "Virtual.Machines"`, false},
		"empty resource":  {DefaultAPIVersion, "", `resource ""`, false},
		"empty apiVerson": {"", DefaultResource, `api version "": want group/version`, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gvr, err := ParseGVR(tc.apiVersion, tc.resource)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("error %v", err)
			case tc.ok && gvr.String() != tc.want:
				t.Fatalf("got %s, want %s", gvr, tc.want)
			case !tc.ok && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("error %v, want one starting %q", err, tc.want)
			}
		})
	}
}

// TestStatusRoundTrip writes a status as a merge patch onto an object and reads it back
// through a view: what the controller writes is what it reads, so it never rewrites a
// status it has just written.
func TestStatusRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := Status{
		Phase: PhaseActive, Reason: "ServerReady", Message: "ok",
		Server:              &ServerStatus{Name: "vm-server", ID: "uid-1", State: "Running", Usage: &Usage{CPU: "250m", Memory: "100Mi"}},
		ConsecutiveFailures: 2, ObservedGeneration: 7, LastUpdateTime: at,
		Conditions: []Condition{{Type: ConditionReady, Status: ConditionTrue, ObservedGeneration: 7, LastTransitionTime: at, Reason: "ServerReady", Message: "ok"}},
		RootDisk:   &RootDiskStatus{ClaimName: "vm-rootdisk", Phase: "Bound", Capacity: "1Gi", Request: "1G"},
	}
	obj := []byte(`{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"a","resourceVersion":"5"},
		"status":{"phase":"Creating","stale":"kept by merge","server":{"id":"old"}}}`)
	patch, err := StatusPatch(builtin(t, "v1alpha1"), st, "5")
	if err != nil {
		t.Fatal(err)
	}
	merged, err := jsonpatch.MergePatch(obj, patch)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := Parse(merged, builtin(t, "v1alpha1"))
	if err != nil {
		t.Fatal(err)
	}
	got := vm.Status()
	if !got.SameAs(st) || !got.LastUpdateTime.Equal(at) {
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(st)
		t.Fatalf("read back\n%s\nwant\n%s", a, b)
	}
	if vm.ResourceVersion() != "5" {
		t.Errorf("patch must carry resourceVersion as a precondition, got %q", vm.ResourceVersion())
	}

	// A disk that has no capacity yet leaves none behind, and one that records no request
	// (a status of a layout without it) none either.
	st.RootDisk = &RootDiskStatus{ClaimName: "vm-rootdisk", Phase: "Pending"}
	patch, _ = StatusPatch(builtin(t, "v1alpha1"), st, "")
	merged, _ = jsonpatch.MergePatch(merged, patch)
	vm, _ = Parse(merged, builtin(t, "v1alpha1"))
	if d := vm.Status().RootDisk; d == nil || *d != *st.RootDisk {
		t.Errorf("disk read back as %+v, want %+v", d, st.RootDisk)
	}

	// A status without a server removes the old server fields rather than leaving them, and
	// one without a disk the disk's.
	st.Server, st.Message, st.ConsecutiveFailures, st.RootDisk = nil, "", 0, nil
	patch, _ = StatusPatch(builtin(t, "v1alpha1"), st, "")
	merged, _ = jsonpatch.MergePatch(merged, patch)
	vm, _ = Parse(merged, builtin(t, "v1alpha1"))
	if s := vm.Status(); s.Server != nil || s.Message != "" || s.ConsecutiveFailures != 0 || s.RootDisk != nil {
		t.Errorf("stale fields survived: %+v", s)
	}
	// Nor is an empty shell of the server or the disk left behind ({server: {usage: {}}}).
	for _, path := range []string{"status.server", "status.rootDisk"} {
		if s := gjson.GetBytes(merged, path); s.Exists() {
			t.Errorf("%s is %s, want it gone", path, s.Raw)
		}
	}
}

func TestStatusPatchCollidingPaths(t *testing.T) {
	f := builtin(t, "v1alpha1")
	f.Reason = "status.phase.reason" // under a leaf: a broken field map
	if _, err := StatusPatch(f, Status{Phase: PhaseActive}, ""); err == nil {
		t.Fatal("colliding paths were accepted")
	}
}

func TestSameAsIgnoresTimes(t *testing.T) {
	a := Status{Phase: PhaseActive, LastUpdateTime: time.Unix(1, 0), Conditions: []Condition{{Type: ConditionReady, Status: ConditionTrue, LastTransitionTime: time.Unix(1, 0)}}}
	b := a
	b.LastUpdateTime = time.Unix(2, 0)
	b.Conditions = []Condition{{Type: ConditionReady, Status: ConditionTrue, LastTransitionTime: time.Unix(2, 0)}}
	if !a.SameAs(b) {
		t.Error("statuses that differ only in times are not the same")
	}
	b.Conditions[0].Status = ConditionFalse
	if a.SameAs(b) {
		t.Error("a changed condition status went unnoticed")
	}
}

// TestRemoveCondition: every condition of the type goes (a damaged status may hold two), the
// others stay in their order with their times, and the list given is left as it was.
func TestRemoveCondition(t *testing.T) {
	at := time.Date(2026, 6, 1, 11, 0, 0, 0, time.UTC)
	ready := Condition{Type: ConditionReady, Status: ConditionTrue, ObservedGeneration: 2, LastTransitionTime: at, Reason: "R", Message: "m"}
	resizing := Condition{Type: ConditionResizing, Status: ConditionTrue, LastTransitionTime: at, Reason: "ResizePending"}
	usage := Condition{Type: ConditionUsageReported, Status: ConditionFalse, LastTransitionTime: at.Add(time.Hour)}
	conds := []Condition{resizing, ready, resizing, usage}
	got := RemoveCondition(conds, ConditionResizing)
	if want := []Condition{ready, usage}; !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if want := []Condition{resizing, ready, resizing, usage}; !slices.Equal(conds, want) {
		t.Errorf("the list given became %+v", conds)
	}
	if got := RemoveCondition(conds, ConditionRestartRequired); !slices.Equal(got, conds) {
		t.Errorf("removing a type the list lacks gave %+v", got)
	}
}

// TestSameAsFields: a change of any field but the times makes a different status, a server
// present but empty included.
func TestSameAsFields(t *testing.T) {
	base := func() Status {
		return Status{Phase: PhaseActive, Reason: "ServerReady", Message: "m", ConsecutiveFailures: 1, ObservedGeneration: 2,
			RestartedAt: "r", Server: &ServerStatus{Name: "n", ID: "i", State: "Running", Usage: &Usage{CPU: "1m", Memory: "1Mi"}},
			Conditions: []Condition{{Type: ConditionReady, Status: ConditionTrue, Reason: "ServerReady"}},
			RootDisk:   &RootDiskStatus{ClaimName: "c", Phase: "Bound", Capacity: "1Gi"}}
	}
	for name, change := range map[string]func(*Status){
		"phase":               func(s *Status) { s.Phase = PhaseFailed },
		"reason":              func(s *Status) { s.Reason = "Other" },
		"message":             func(s *Status) { s.Message = "" },
		"consecutiveFailures": func(s *Status) { s.ConsecutiveFailures = 0 },
		"observedGeneration":  func(s *Status) { s.ObservedGeneration = 3 },
		"restartedAt":         func(s *Status) { s.RestartedAt = "" },
		"no server":           func(s *Status) { s.Server = nil },
		"empty server":        func(s *Status) { s.Server = &ServerStatus{} },
		"server name":         func(s *Status) { s.Server.Name = "m" },
		"server id":           func(s *Status) { s.Server.ID = "j" },
		"server state":        func(s *Status) { s.Server.State = "Pending" },
		"no usage":            func(s *Status) { s.Server.Usage = nil },
		"usage cpu":           func(s *Status) { s.Server.Usage.CPU = "2m" },
		"usage memory":        func(s *Status) { s.Server.Usage.Memory = "2Mi" },
		"no conditions":       func(s *Status) { s.Conditions = nil },
		"condition reason":    func(s *Status) { s.Conditions[0].Reason = "Other" },
		"condition message":   func(s *Status) { s.Conditions[0].Message = "x" },
		"no disk":             func(s *Status) { s.RootDisk = nil },
		"disk claim":          func(s *Status) { s.RootDisk.ClaimName = "d" },
		"disk phase":          func(s *Status) { s.RootDisk.Phase = "Pending" },
		"disk capacity":       func(s *Status) { s.RootDisk.Capacity = "2Gi" },
	} {
		a, b := base(), base()
		change(&b)
		if a.SameAs(b) || b.SameAs(a) {
			t.Errorf("%s: a change went unnoticed", name)
		}
	}
	a, b := base(), base()
	a.Server, b.Server = nil, nil
	if !a.SameAs(b) {
		t.Error("two statuses without a server differ")
	}
}

func TestViewMetadata(t *testing.T) {
	vm, err := Parse([]byte(`{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"n","namespace":"ns","uid":"u",
		"generation":3,"resourceVersion":"9","deletionTimestamp":"2026-01-01T00:00:00Z","finalizers":["a","`+Finalizer+`"]}}`), builtin(t, "v1alpha1"))
	if err != nil {
		t.Fatal(err)
	}
	if vm.Name() != "n" || vm.Namespace() != "ns" || vm.UID() != "u" || vm.Generation() != 3 || vm.ResourceVersion() != "9" ||
		!vm.Deleting() || !vm.HasFinalizer(Finalizer) || vm.HasFinalizer("b") || vm.Kind() != "VirtualMachine" {
		t.Errorf("metadata misread: %s", vm.JSON())
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{`} {
		if _, err := Parse([]byte(bad), builtin(t, "v1alpha1")); err == nil {
			t.Errorf("Parse(%q) accepted a non-object", bad)
		}
	}
}

// TestSpecValid covers the accepted forms; the refused ones are golden cases under
// testdata/decide (invalid-*).
func TestSpecValid(t *testing.T) {
	tests := map[string]struct {
		spec           string
		cpu, mem, disk string
		action         RunStrategy
		class          string
		policy         ReclaimPolicy // "": unset, read as ReclaimDelete
	}{
		"disk class and policy": {`{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"1Gi"},"rootDiskStorageClassName":"fast-ssd","rootDiskReclaimPolicy":"Retain"}`,
			"1", "1Gi", "1Gi", RunAlways, "fast-ssd", ReclaimRetain},
		"policy Delete named": {`{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"1Gi"},"rootDiskReclaimPolicy":"Delete"}`,
			"1", "1Gi", "1Gi", RunAlways, "", ReclaimDelete},
		"numbers":        {`{"action":"active","resource":{"cpu":2,"memory":4000000000,"rootDisk":40000000000}}`, "2", "4G", "40G", RunAlways, "", ""},
		"strings":        {`{"action":"inactive","resource":{"cpu":"500m","memory":"512Mi","rootDisk":"10Gi"}}`, "500m", "512Mi", "10Gi", RunHalted, "", ""},
		"decimal cpu":    {`{"action":"active","resource":{"cpu":0.5,"memory":"1Gi","rootDisk":"1Gi"}}`, "500m", "1Gi", "1Gi", RunAlways, "", ""},
		"exponent":       {`{"action":"active","resource":{"cpu":"1e-1","memory":"1e9","rootDisk":"1E"}}`, "100e-3", "1e9", "1E", RunAlways, "", ""},
		"smallest valid": {`{"action":"active","resource":{"cpu":"1m","memory":1048576,"rootDisk":1}}`, "1m", "1048576", "1", RunAlways, "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, err := Parse([]byte(`{"spec":`+tc.spec+`}`), builtin(t, "v1alpha1"))
			if err != nil {
				t.Fatal(err)
			}
			s, errs := vm.Spec()
			if len(errs) > 0 {
				t.Fatalf("refused: %v", errs)
			}
			// A policy the VM names is told from the default: a kept disk stays kept unless the
			// VM names Delete.
			if set := tc.policy != ""; s.ReclaimPolicySet != set {
				t.Errorf("ReclaimPolicySet = %t, want %t", s.ReclaimPolicySet, set)
			}
			if tc.policy == "" {
				tc.policy = ReclaimDelete
			}
			if s.CPU.String() != tc.cpu || s.Memory.String() != tc.mem || s.RootDisk.String() != tc.disk || s.RunStrategy != tc.action ||
				s.StorageClass != tc.class || s.ReclaimPolicy != tc.policy {
				t.Errorf("got %s %s %s %s %q %s", s.CPU.String(), s.Memory.String(), s.RootDisk.String(), s.RunStrategy, s.StorageClass, s.ReclaimPolicy)
			}
		})
	}
}

// TestSpecMemoryMinimum: memory below MinMemory is refused, and memory written without a unit
// (bytes) is told to be bytes, with the size most likely meant up to maxMebibytesHint (64Gi
// read as MiB), and with the least in bytes beyond it, where MiB would be no size a VM is
// given; at or above MinMemory, in any form, it is accepted.
func TestSpecMemoryMinimum(t *testing.T) {
	f := builtin(t, "v1alpha1")
	for memory, want := range map[string]string{
		`"512"`:    `spec.resource.memory: Invalid value: "512": must be at least 1Mi; 512 is 512 bytes: did you mean 512Mi?`,
		`512`:      `spec.resource.memory: Invalid value: "512": must be at least 1Mi; 512 is 512 bytes: did you mean 512Mi?`,
		`65536`:    `spec.resource.memory: Invalid value: "65536": must be at least 1Mi; 65536 is 65536 bytes: did you mean 65536Mi?`,
		`"065536"`: `spec.resource.memory: Invalid value: "065536": must be at least 1Mi; 065536 is 065536 bytes: did you mean 065536Mi?`,
		`65537`:    `spec.resource.memory: Invalid value: "65537": must be at least 1Mi (1048576 bytes); 65537 is 65537 bytes`,
		`1048575`:  `spec.resource.memory: Invalid value: "1048575": must be at least 1Mi (1048576 bytes); 1048575 is 1048575 bytes`,
		`"1000Ki"`: `spec.resource.memory: Invalid value: "1000Ki": must be at least 1Mi`,
		`"1M"`:     `spec.resource.memory: Invalid value: "1M": must be at least 1Mi`,
		`"1e3"`:    `spec.resource.memory: Invalid value: "1e3": must be at least 1Mi`,
		`"100m"`:   `spec.resource.memory: Invalid value: "100m": must be at least 1Mi`,
		`1048576`:  "",
		`"1Mi"`:    "",
		`"1024Ki"`: "",
		`"16Mi"`:   "",
	} {
		vm, err := Parse([]byte(`{"spec":{"action":"active","resource":{"cpu":1,"memory":`+memory+`,"rootDisk":"1Gi"}}}`), f)
		if err != nil {
			t.Fatal(err)
		}
		_, errs := vm.Spec()
		got := ""
		if len(errs) > 0 {
			got = errs.ToAggregate().Error()
		}
		if got != want {
			t.Errorf("memory %s: got %q, want %q", memory, got, want)
		}
	}
}

// TestSpecQuantityText: a quantity whose text is longer than 100 characters, or whose
// exponent goes beyond 200 either way, is refused before it is parsed, with a reason: such an
// exponent passes admission's pattern, and apimachinery wraps it into an int32 (1e4294967297
// would read as 10) or takes minutes over it (1e-99999999). Exponents within the bound still
// read, and the E (exa) and Ei suffixes are not taken for one.
func TestSpecQuantityText(t *testing.T) {
	f := builtin(t, "v1alpha1")
	for cpu, want := range map[string]string{
		"1e-99999999":                  "its exponent is out of range",
		"1e2147483648":                 "its exponent is out of range",
		"1e4294967297":                 "its exponent is out of range",
		"1e4294967305":                 "its exponent is out of range",
		"1e201":                        "its exponent is out of range",
		"1" + strings.Repeat("0", 100): "longer than 100 characters",
		"1e2":                          "",
		"100000e-3":                    "",
		"0.1e+3":                       "",
		"1E":                           "must be at most", // exa: a quantity, too many cores
		"1Ei":                          "must be at most",
	} {
		vm, err := Parse([]byte(`{"spec":{"action":"active","resource":{"cpu":"`+cpu+`","memory":"1Gi","rootDisk":"1Gi"}}}`), f)
		if err != nil {
			t.Fatal(err)
		}
		s, errs := vm.Spec()
		switch {
		case want == "" && len(errs) > 0:
			t.Errorf("cpu %s refused: %v", cpu, errs)
		case want == "" && s.CPU.Cmp(resource.MustParse("100")) != 0:
			t.Errorf("cpu %s read as %s, want 100", cpu, s.CPU.String())
		case want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Detail, want)):
			t.Errorf("cpu %s: errors %v, want one saying %q", cpu, errs, want)
		}
	}
}

// TestGJSONPath: a dotted path reads the key it names, also when a key holds characters that
// gjson treats as syntax; a plain path is used as it is.
func TestGJSONPath(t *testing.T) {
	doc := `{"spec":{"cpu":"1","a*b":"star","x#":"hash","w|v":"pipe","k@1":"at","q?":"ask","e=1":"eq","n!":"bang","p%":"pct"}}`
	tests := map[string]string{
		"spec.cpu": "1",
		"spec.a*b": "star",
		"spec.x#":  "hash",
		"spec.w|v": "pipe",
		"spec.k@1": "at",
		"spec.q?":  "ask",
		"spec.e=1": "eq",
		"spec.n!":  "bang",
		"spec.p%":  "pct",
	}
	for path, want := range tests {
		if got := gjson.Get(doc, gjsonPath(path)).String(); got != want {
			t.Errorf("%s: got %q, want %q", path, got, want)
		}
	}
	if got := gjsonPath("spec.resource.cpu"); got != "spec.resource.cpu" {
		t.Errorf("plain path became %q", got)
	}
}
