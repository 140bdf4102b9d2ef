package schema

import (
	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// EvictionStrategy says what an eviction of a VM's server (a node drain's, through the
// eviction API) does to the VM (docs/eviction.md).
type EvictionStrategy string

// The eviction strategies, in the words of spec.evictionStrategy and --eviction-strategy.
const (
	// EvictionNone lets the eviction take the server like any pod's; what follows is the
	// controller's answer to a server that went (an active VM gets a new one).
	EvictionNone EvictionStrategy = "None"
	// EvictionReplace sees the eviction coming and brings the server up again once the old
	// one is gone, with the same disk and without a failure's backoff, on another node if
	// one fits.
	EvictionReplace EvictionStrategy = "Replace"
	// EvictionBlock keeps a PodDisruptionBudget over the server, so that a drain waits
	// until the VM is moved or stopped by its owner.
	EvictionBlock EvictionStrategy = "Block"
)

// EvictionStrategies are the strategies, in the order the docs and errors list them.
var EvictionStrategies = []EvictionStrategy{EvictionNone, EvictionReplace, EvictionBlock}

// Valid reports whether s is one of EvictionStrategies.
func (s EvictionStrategy) Valid() bool {
	for _, k := range EvictionStrategies {
		if s == k {
			return true
		}
	}
	return false
}

// evictionStrategy reads spec.evictionStrategy: "" when the layout has no such field or the
// VM does not say (the controller's default applies), else the strategy, or an error for a
// value that is none (the CRD's enum refuses it at admission; a CRD of another group may not).
func evictionStrategy(path string, v gjson.Result) (EvictionStrategy, *field.Error) {
	switch {
	case path == "" || !v.Exists() || v.Type == gjson.Null:
		return "", nil
	case v.Type != gjson.String:
		return "", field.Invalid(fieldPath(path), v.Raw, "must be a string")
	}
	s := EvictionStrategy(v.Str)
	if !s.Valid() {
		want := make([]string, len(EvictionStrategies))
		for i, k := range EvictionStrategies {
			want[i] = string(k)
		}
		return "", field.NotSupported(fieldPath(path), v.Str, want)
	}
	return s, nil
}
