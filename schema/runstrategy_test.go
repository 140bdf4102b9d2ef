package schema

import (
	"strings"
	"testing"
	"time"
)

// TestRunStrategyWords: every run strategy reads from each built-in version's words, and a
// field map's words are checked: optional, non-empty, each a strategy's own.
func TestRunStrategyWords(t *testing.T) {
	for _, v := range BuiltinVersions() {
		f := builtin(t, v)
		for _, rs := range RunStrategies {
			w := f.StrategyWord(rs)
			if w == "" {
				t.Errorf("%s has no word for %s", v, rs)
				continue
			}
			if got, ok := f.StrategyOf(w); !ok || got != rs {
				t.Errorf("%s: %q reads as %q %v, want %s", v, w, got, ok, rs)
			}
		}
	}
	if got := quoted([]string{"a", "b", "c"}); got != `"a", "b" or "c"` {
		t.Errorf("quoted: %s", got)
	}

	base := func(action string) []byte {
		return []byte("spec:\n  action: {path: spec.power, active: \"On\", inactive: \"Off\"" + action + "}\n" +
			"  resource: {cpu: spec.cpu, memory: spec.memory, rootDisk: spec.disk}\n" +
			"status:\n  phase: status.phase\n  reason: status.reason\n  message: status.message\n" +
			"  server: {name: status.s.name, id: status.s.id, state: status.s.state}\n" +
			"  consecutiveFailures: status.failures\n  observedGeneration: status.gen\n  conditions: status.conditions\n")
	}
	tests := map[string]struct {
		action string
		err    string
		words  []string
	}{
		"only active and inactive": {"", "", []string{"On", "Off"}},
		"all five":                 {", rerunOnFailure: Retry, once: Once, manual: Hand", "", []string{"On", "Retry", "Once", "Hand", "Off"}},
		"manual only":              {", manual: Hand", "", []string{"On", "Hand", "Off"}},
		"empty word":               {`, once: ""`, "spec.action.once: want a non-empty string", nil},
		"a number":                 {", once: 1", "spec.action.once: want a non-empty string, got the number 1", nil},
		"another's word":           {", manual: \"On\"", `spec.action.manual: "On" is also the word of another run strategy`, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := ParseFieldMap(base(tc.action))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(f.StrategyWords(), ","); got != strings.Join(tc.words, ",") {
				t.Errorf("words %s, want %v", got, tc.words)
			}
			// A strategy without a word is refused as an unsupported value, quoting the words.
			vm, _ := Parse([]byte(`{"spec":{"power":"manual","cpu":1,"memory":"1Gi","disk":"1Gi"}}`), f)
			if _, errs := vm.Spec(); len(errs) != 1 || !strings.Contains(errs[0].Error(), `Unsupported value: "manual"`) {
				t.Errorf("errors %v", errs)
			}
		})
	}
}

// TestRequests: the start and stop requests and the stop's grace period, as read from the
// annotations; a layout without the status fields reads none.
func TestRequests(t *testing.T) {
	f := builtin(t, "v1alpha1")
	raw := `{"metadata":{"annotations":{"` + AnnotationStartRequestedAt + `":"2026-06-01T12:00:00Z","` + AnnotationStopRequestedAt +
		`":"not a time","` + AnnotationStopGracePeriod + `":"%s"}},"spec":{}}`
	for grace, want := range map[string]time.Duration{"0": 0, "30": 30 * time.Second, "-1": -1, "x": -1, "": -1} {
		vm, err := Parse([]byte(strings.Replace(raw, "%s", grace, 1)), f)
		if err != nil {
			t.Fatal(err)
		}
		g, ok := vm.StopGracePeriod()
		if want < 0 && ok || want >= 0 && (!ok || g != want) {
			t.Errorf("grace %q read as %v %v", grace, g, ok)
		}
		start, stop := vm.StartRequested(), vm.StopRequested()
		if start.Value != "2026-06-01T12:00:00Z" || !start.At.Equal(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)) ||
			stop.Value != "not a time" || !stop.At.IsZero() {
			t.Errorf("requests %+v %+v", start, stop)
		}
	}
	f.StartRequestedAt, f.StopRequestedAt = "", ""
	vm, _ := Parse([]byte(strings.Replace(raw, "%s", "1", 1)), f)
	if vm.StartRequested().Value != "" || vm.StopRequested().Value != "" {
		t.Error("a layout without the status fields reads requests")
	}
}
