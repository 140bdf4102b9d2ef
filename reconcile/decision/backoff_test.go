package decision

import (
	"math"
	"testing"
	"time"
)

// TestBackoff: the wait doubles from RestartBackoff with each failure and stops at
// MaxRestartBackoff, whatever the settings: a maximum near time.Duration's own, whose
// doubling would pass it, waits that maximum, never a wrapped (negative) wait that replaces a
// failing server at once.
func TestBackoff(t *testing.T) {
	const maxDuration = time.Duration(math.MaxInt64)
	tests := map[string]struct {
		base, max time.Duration
		failures  int
		want      time.Duration
	}{
		"first":                  {10 * time.Second, 5 * time.Minute, 0, 10 * time.Second},
		"doubled":                {10 * time.Second, 5 * time.Minute, 2, 40 * time.Second},
		"capped":                 {10 * time.Second, 5 * time.Minute, 10, 5 * time.Minute},
		"many failures":          {10 * time.Second, 5 * time.Minute, math.MaxInt, 5 * time.Minute},
		"base is the max":        {time.Minute, time.Minute, 3, time.Minute},
		"a doubling would wrap":  {10 * time.Second, 2000000 * time.Hour, 30, 2000000 * time.Hour},
		"and wrap again":         {10 * time.Second, 2000000 * time.Hour, 40, 2000000 * time.Hour},
		"the largest max":        {10 * time.Second, maxDuration, 70, maxDuration},
		"the largest base":       {maxDuration, maxDuration, 5, maxDuration},
		"just under half of max": {maxDuration/2 - 1, maxDuration, 1, maxDuration/2*2 - 2},
		"one nanosecond":         {1, maxDuration, 200, maxDuration},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := Policy{RestartBackoff: tc.base, MaxRestartBackoff: tc.max}
			if got := p.backoff(tc.failures); got != tc.want {
				t.Errorf("backoff(%d) with %s up to %s = %s, want %s", tc.failures, tc.base, tc.max, got, tc.want)
			}
		})
	}
}
