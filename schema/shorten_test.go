package schema

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestShorten: a message past its limit is cut on a character's boundary and ends in "...",
// never longer than the limit; one within it is kept whole.
func TestShorten(t *testing.T) {
	cases := map[string]struct {
		s     string
		limit int
		want  string
	}{
		"within":              {"server ready", 12, "server ready"},
		"cut":                 {"server ready", 9, "server..."},
		"a rune at the cut":   {"größer", 6, "gr..."}, // ö is bytes 2 and 3: a cut at 3 would split it
		"a limit of the dots": {"server", 3, "..."},
		"below the dots":      {"server", 2, ".."},
		"empty":               {"", 0, ""},
		"no room":             {"server", 0, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Shorten(tc.s, tc.limit)
			if got != tc.want || len(got) > tc.limit || !utf8.ValidString(got) {
				t.Errorf("Shorten(%q, %d) = %q, want %q", tc.s, tc.limit, got, tc.want)
			}
		})
	}
}

// TestSetConditionShortens: a condition's message is kept to the CRD's limit, and the same
// long message set again leaves the condition as it was (so it is not written again).
func TestSetConditionShortens(t *testing.T) {
	at := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", ConditionMessageLimit+100)
	c := Condition{Type: ConditionReady, Status: ConditionFalse, Reason: "InvalidSpec", Message: long, LastTransitionTime: at}
	conds := SetCondition(nil, c)
	if len(conds) != 1 || len(conds[0].Message) != ConditionMessageLimit || !strings.HasSuffix(conds[0].Message, "...") {
		t.Fatalf("conditions %d, message of %d bytes; want one of %d ending in ...", len(conds), len(conds[0].Message), ConditionMessageLimit)
	}
	c.LastTransitionTime = at.Add(time.Hour)
	if again := SetCondition(conds, c); again[0] != conds[0] {
		t.Errorf("set again: %+v, want it unchanged", again[0])
	}
}
