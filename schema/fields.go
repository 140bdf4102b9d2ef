package schema

import (
	"fmt"
	"strings"
)

// Fields says where each field of a VirtualMachine lives in an object, as dotted paths from
// the object's root ("spec.resource.cpu"). Path segments are plain keys: no wildcards, no
// array indices, so that the same path serves gjson for reading and the patch renderer for
// writing.
type Fields struct {
	// Spec: what the user asks for.
	Action   string // "active" or "inactive"
	CPU      string // resource.Quantity
	Memory   string // resource.Quantity
	RootDisk string // resource.Quantity
	Image    string // optional per-VM server image; empty when the version has none

	// Status: what the controller reports.
	Phase               string
	Reason              string
	Message             string
	ServerName          string
	ServerID            string
	ServerState         string
	UsageCPU            string
	UsageMemory         string
	ConsecutiveFailures string
	LastUpdateTime      string
	ObservedGeneration  string
	Conditions          string
}

// V1alpha1 is the layout of cloudnative.czs/v1alpha1.
var V1alpha1 = Fields{
	Action:   "spec.action",
	CPU:      "spec.resource.cpu",
	Memory:   "spec.resource.memory",
	RootDisk: "spec.resource.rootDisk",

	Phase:               "status.phase",
	Reason:              "status.reason",
	Message:             "status.message",
	ServerName:          "status.server.name",
	ServerID:            "status.server.id",
	ServerState:         "status.server.state",
	UsageCPU:            "status.server.usage.cpu",
	UsageMemory:         "status.server.usage.memory",
	ConsecutiveFailures: "status.consecutiveFailures",
	LastUpdateTime:      "status.lastUpdateTime",
	ObservedGeneration:  "status.observedGeneration",
	Conditions:          "status.conditions",
}

// builtin maps a served version of this project's CRD to its layout.
var builtin = map[string]Fields{
	"v1alpha1": V1alpha1,
}

// ForVersion returns the built-in layout of a version of this project's CRD.
func ForVersion(version string) (Fields, error) {
	f, ok := builtin[version]
	if !ok {
		known := make([]string, 0, len(builtin))
		for v := range builtin {
			known = append(known, v)
		}
		return Fields{}, fmt.Errorf("no built-in field map for version %q (known: %s)", version, strings.Join(known, ", "))
	}
	return f, nil
}

// statusPaths lists every status path with its name, in a fixed order, for rendering patches.
func (f Fields) statusPaths() []string {
	return []string{f.Phase, f.Reason, f.Message, f.ServerName, f.ServerID, f.ServerState, f.ConsecutiveFailures,
		f.LastUpdateTime, f.ObservedGeneration, f.Conditions}
}

// gjsonPath turns a dotted path into a gjson path, escaping the characters gjson treats as
// syntax so that a key such as "cloudnative.czs/x" could never be misread.
func gjsonPath(path string) string {
	segs := splitPath(path)
	for i, s := range segs {
		segs[i] = escapeGJSON(s)
	}
	return strings.Join(segs, ".")
}

func escapeGJSON(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '.', '*', '?', '|', '#', '@', '\\', '!', '=', '<', '>', '%':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// splitPath splits a dotted path into its keys.
func splitPath(path string) []string { return strings.Split(path, ".") }
