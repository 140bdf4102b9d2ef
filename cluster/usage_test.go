package cluster

import (
	"strings"
	"testing"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// TestDefaultMemoryUsage: the default is read from usage.yaml as it ships, and a file whose
// expression has no constant at its end is an error, not a usage of zero.
func TestDefaultMemoryUsage(t *testing.T) {
	q, err := DefaultMemoryUsage()
	if err != nil || q.Sign() <= 0 {
		t.Fatalf("DefaultMemoryUsage() = %v, %v; want a positive quantity", q.String(), err)
	}
	if !strings.Contains(string(usageYAML), `Quantity("`+q.String()+`")`) {
		t.Errorf("DefaultMemoryUsage() = %s, not a constant of usage.yaml", q.String())
	}
	bad := strings.Replace(string(usageYAML), `: Quantity("`+q.String()+`")`, `: Quantity(pod.metadata.annotations["x"])`, 1)
	if _, err := defaultMemoryUsage([]byte(bad)); err == nil {
		t.Errorf("a memory expression without a constant default: no error")
	}
}
