package command

import (
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
)

// TestRunUsageMaxAge: --usage-interval sets how old the pod backend's snapshot of usage may
// grow (pods.UsageMaxAge): without it, the backend fell back to its floor whatever the
// interval, and listed every server pod's metrics up to twelve times per interval at the
// default 1m.
func TestRunUsageMaxAge(t *testing.T) {
	for args, want := range map[string]time.Duration{
		"":                     30 * time.Second,
		"--usage-interval=10m": 5 * time.Minute,
		"--usage-interval=2s":  pods.UsageMaxAge(0),
		"--usage-interval=0":   pods.UsageMaxAge(0),
	} {
		c := &runConfig{}
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		parseFlags(t, runCommand(c), argv...)
		if got := c.podsConfig().UsageMaxAge; got != want {
			t.Errorf("%q: the pod backend's UsageMaxAge is %s, want %s", args, got, want)
		}
	}
}
