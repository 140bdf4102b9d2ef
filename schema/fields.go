package schema

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// Fields says where each field of a VirtualMachine lives in an object, as dotted paths from
// the object's root ("spec.resource.cpu"). Path segments are plain keys: no wildcards, no
// array indices, so that the same path serves gjson for reading and the patch renderer for
// writing.
//
// A Fields value comes from a field-map file (ParseFieldMap), and the built-in ones of this
// project's versions are such files too (ForVersion), so the controller knows one layout
// format only.
//
// Each path field is filled by the key of a map file whose `field` tag names it (fileMap in
// fieldmap.go). The order of the fields here is the order of Paths, and of ParseFieldMap's
// messages on one line.
type Fields struct {
	// Spec: what the user asks for.
	Action   string // the action: ActiveValue or InactiveValue
	CPU      string // resource.Quantity
	Memory   string // resource.Quantity
	RootDisk string // resource.Quantity
	Image    string // optional per-VM server image; empty when the layout has none
	// RootDiskStorageClass and RootDiskReclaimPolicy are optional: the StorageClass of the
	// VM's disk and what becomes of the disk when the VM is deleted (Delete or Retain). A
	// layout without them gets the cluster's default class and Delete, but for a disk kept
	// already (an earlier VM's, one marked kept), which stays kept: such a layout cannot say
	// Delete (the decision's whyKept).
	RootDiskStorageClass  string
	RootDiskReclaimPolicy string
	// EvictionStrategy is optional: what a drain's eviction of the VM's server does (None,
	// Replace or Block; schema/eviction.go). A layout without it gets the controller's
	// --eviction-strategy.
	EvictionStrategy string
	// Placement is optional: where the VM's server may run (node selector, affinity,
	// tolerations, priority class, topology spread), an object in the shapes of a pod's
	// spec (placement.go). A layout without it places servers anywhere.
	Placement string

	// ActiveValue and InactiveValue are the values of Action that mean "keep a server
	// running" and "no server, keep the object"; another CRD may say "On" and "Off". Empty
	// means "active" and "inactive".
	ActiveValue   string
	InactiveValue string
	// RerunOnFailureValue, OnceValue and ManualValue are the values of Action that mean
	// the run strategies of those names (RunStrategy); empty: the layout cannot express that
	// strategy, a limit its users meet as an unsupported value.
	RerunOnFailureValue string
	OnceValue           string
	ManualValue         string

	// Status: what the controller reports.
	Phase               string
	Reason              string
	Message             string
	ServerName          string
	ServerID            string
	ServerState         string
	UsageCPU            string // optional
	UsageMemory         string // optional
	ConsecutiveFailures string
	ObservedGeneration  string
	LastUpdateTime      string // optional
	Conditions          string
	// RestartedAt is optional: the value of the restart annotation last acted on. A layout
	// without it cannot record a restart, so the annotation means nothing there (acting on
	// it without a record would restart the server on every reconcile).
	RestartedAt string
	// RootDiskClaim, RootDiskPhase and RootDiskCapacity are optional, all three or none: the
	// VM's disk (its name, phase and capacity). A layout without them does not report the
	// disk (HasRootDiskStatus).
	RootDiskClaim    string
	RootDiskPhase    string
	RootDiskCapacity string
	// RootDiskRequest is optional, and only beside the three above: the size the disk's
	// claim asks for, which storage that rounds sizes up leaves below its capacity. The CRD's
	// rule on rootDisk lets it go back to that size (a growth the class cannot make taken
	// back); a layout without it reports the rest of the disk, and rootDisk goes back no
	// lower than the disk's capacity there (a CRD copied from an earlier release).
	RootDiskRequest string

	// ServerNode and ServerIP are optional: where the server runs, its host and address. A
	// layout without them does not report them (the decision leaves them out).
	ServerNode string
	ServerIP   string
	// The run strategies' status fields, all optional. NextRetryTime is when a server that
	// failed will be replaced (RFC 3339), while the VM waits out the backoff.
	// StartRequestedAt and StopRequestedAt are the values of the start and stop annotations
	// last acted on; a layout without them cannot record a request, so those annotations
	// mean nothing there (as the restart annotation without RestartedAt).
	NextRetryTime    string
	StartRequestedAt string
	StopRequestedAt  string
	// Migration is optional: the last migration asked for with AnnotationMigrateRequestedAt
	// and where it stands, an object (MigrationStatus). A layout without it cannot record
	// a migration, so the annotation means nothing there.
	Migration string
}

// HasRootDiskStatus reports whether the layout has a place for the VM's disk in its status.
func (f Fields) HasRootDiskStatus() bool { return f.RootDiskClaim != "" }

// Group is the API group of this project's CRD.
const Group = "cloudnative.czs"

// builtinMaps holds the field maps of this project's CRD versions, one file per version,
// in the same format a user writes for another CRD.
//
//go:embed fieldmaps/*.yaml
var builtinMaps embed.FS

// ForVersion returns the built-in layout of a version of this project's CRD
// (cloudnative.czs). Other groups need a field-map file.
func ForVersion(gv k8sschema.GroupVersion) (Fields, error) {
	known := BuiltinVersions()
	if gv.Group != Group {
		return Fields{}, fmt.Errorf("no built-in field map for group %q (built in: %s/%s); give one with --schema-file",
			gv.Group, Group, strings.Join(known, ", "+Group+"/"))
	}
	data, err := builtinMaps.ReadFile(path.Join("fieldmaps", gv.Version+".yaml"))
	if err != nil {
		return Fields{}, fmt.Errorf("no built-in field map for version %q of %s (built in: %s)", gv.Version, Group, strings.Join(known, ", "))
	}
	f, err := ParseFieldMap(data)
	if err != nil {
		return Fields{}, fmt.Errorf("built-in field map of %s: %w", gv, err)
	}
	return f, nil
}

// BuiltinVersions lists the versions of this project's CRD that have a built-in field map.
func BuiltinVersions() []string {
	names, _ := fs.Glob(builtinMaps, "fieldmaps/*.yaml")
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, strings.TrimSuffix(path.Base(n), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// activeValue is the value of Action that means RunAlways (Always; likewise inactiveValue, Halted).
func (f Fields) activeValue() string {
	if f.ActiveValue == "" {
		return "active"
	}
	return f.ActiveValue
}

func (f Fields) inactiveValue() string {
	if f.InactiveValue == "" {
		return "inactive"
	}
	return f.InactiveValue
}

// gjsonPath turns a dotted path into a gjson path, escaping the characters gjson treats as
// syntax so that a key such as "cloudnative.czs/x" could never be misread. A path without
// them (every built-in one) is its own gjson path: every field read goes through here, so
// that case allocates nothing.
func gjsonPath(path string) string {
	if !strings.ContainsAny(path, `*?|#@\!=<>%`) {
		return path
	}
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

// ActionKey is the Key of the action in Paths: the one field whose values differ between
// layouts (ActiveValue, InactiveValue).
const ActionKey = "spec.action.path"

// ActionValues returns the layout's words for active and inactive (Always and Halted).
func (f Fields) ActionValues() (active, inactive string) { return f.activeValue(), f.inactiveValue() }
