package schema

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is the one-word summary of a VirtualMachine's state, status.phase.
type Phase string

// The phases a VirtualMachine can be in.
const (
	PhaseCreating    Phase = "Creating"    // a server is being created, started or replaced
	PhaseActive      Phase = "Active"      // the server runs and is ready
	PhaseInactive    Phase = "Inactive"    // action is inactive: no server, object kept
	PhaseFailed      Phase = "Failed"      // the spec is invalid or the server failed
	PhaseTerminating Phase = "Terminating" // the object is being deleted; its server goes first
	PhaseUnknown     Phase = "Unknown"     // the server's state cannot be known (node lost)
)

// Phases lists every phase, for what must name each whether or not a VM is in it: the
// metric of VMs by phase exports a 0 for an empty phase, since a series that vanished
// instead reads to Prometheus as its last value for a while.
var Phases = []Phase{PhaseCreating, PhaseActive, PhaseInactive, PhaseFailed, PhaseTerminating, PhaseUnknown}

// ConditionStatus is the status of a condition: True, False or Unknown.
type ConditionStatus string

// Condition statuses, as in metav1.Condition.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// ConditionReady is the condition that says whether the VM's server runs and is ready.
const ConditionReady = "Ready"

// Conditions of a VM's lifecycle, present (True) only while they hold (docs/lifecycle.md).
const (
	// ConditionResizing: the server is being resized in place; its reason says how far.
	ConditionResizing = "Resizing"
	// ConditionRestartRequired: the spec asks for what the running server cannot take in
	// place (--resize manual); a restart applies it.
	ConditionRestartRequired = "RestartRequired"
)

// The conditions GitOps tools read (kstatus, sigs.k8s.io/cli-utils): each present (True)
// only while it holds, beside Ready (docs/reference/phases-reasons-events.md).
const (
	// ConditionReconciling: the controller works toward the spec (creating, replacing,
	// resizing or stopping the server, retrying after a failure); its reason is the phase's.
	ConditionReconciling = "Reconciling"
	// ConditionStalled: the VM cannot get to its spec without a change (an invalid spec, a
	// server or disk refused, a server stuck waiting for longer than --stalled-after).
	ConditionStalled = "Stalled"
)

// ConditionDiskResizing says the VM's disk does not have the size rootDisk asks for: present
// (True) while a growth is under way or cannot happen; its reason says which
// (docs/disks.md).
const ConditionDiskResizing = "DiskResizing"

// Status is what the controller reports about a VirtualMachine. It mirrors the object's
// status fields and is written back through Fields, so its shape does not depend on where
// the fields sit.
type Status struct {
	Phase               Phase         `json:"phase" yaml:"phase"`
	Reason              string        `json:"reason" yaml:"reason"`
	Message             string        `json:"message,omitempty" yaml:"message,omitempty"`
	Server              *ServerStatus `json:"server,omitempty" yaml:"server,omitempty"`
	ConsecutiveFailures int           `json:"consecutiveFailures,omitempty" yaml:"consecutiveFailures,omitempty"`
	ObservedGeneration  int64         `json:"observedGeneration" yaml:"observedGeneration"`
	LastUpdateTime      time.Time     `json:"lastUpdateTime" yaml:"lastUpdateTime"`
	Conditions          []Condition   `json:"conditions,omitempty" yaml:"conditions,omitempty"`
	// RestartedAt is the value of the restart annotation (AnnotationRestartedAt) that the
	// controller last acted on, so that no value restarts a server twice.
	RestartedAt string `json:"restartedAt,omitempty" yaml:"restartedAt,omitempty"`
	// RootDisk is the VM's disk, the one that outlives its servers; nil when it has none (or
	// the controller keeps no disks).
	RootDisk *RootDiskStatus `json:"rootDisk,omitempty" yaml:"rootDisk,omitempty"`

	// Migration is the last migration asked for (AnnotationMigrateRequestedAt) and where it
	// stands (migration.go); nil when none was.
	Migration *MigrationStatus `json:"migration,omitempty" yaml:"migration,omitempty"`
	// The run strategies' fields (runstrategy.go).
	RunStrategyStatus `json:",inline" yaml:",inline"`
}

// RunStrategyStatus is what the run strategies record in a VM's status: when a failed server
// will be replaced, and the start and stop requests acted on, so that each is carried out
// once however often the VM is looked at again.
type RunStrategyStatus struct {
	// NextRetryTime is when the failed server will be replaced; zero when none waits.
	NextRetryTime time.Time `json:"nextRetryTime,omitempty" yaml:"nextRetryTime,omitempty"`
	// StartRequestedAt and StopRequestedAt are the values of the start and stop annotations
	// last acted on.
	StartRequestedAt string `json:"startRequestedAt,omitempty" yaml:"startRequestedAt,omitempty"`
	StopRequestedAt  string `json:"stopRequestedAt,omitempty" yaml:"stopRequestedAt,omitempty"`
}

// RootDiskStatus identifies the VM's disk and says where it stands.
type RootDiskStatus struct {
	ClaimName string `json:"claimName" yaml:"claimName"` // the backend's name for it (for pods: the PersistentVolumeClaim's)
	Phase     string `json:"phase" yaml:"phase"`         // Pending, Bound or Lost
	Capacity  string `json:"capacity,omitempty" yaml:"capacity,omitempty"`
	// Request is the size the disk asks for (for pods: the claim's request), which storage
	// that rounds sizes up leaves below Capacity: rootDisk may go back to it (the CRD's rule),
	// where a growth the class cannot make is taken back. "" where the layout has no place
	// for it (Fields.RootDiskRequest).
	Request string `json:"request,omitempty" yaml:"request,omitempty"`
}

// AnnotationRestartedAt asks for a restart of the VM's server, in the convention of kubectl
// rollout restart: each new value (a time, by convention) replaces the server once.
const AnnotationRestartedAt = "cloudnative.czs/restartedAt"

// ServerStatus identifies the server behind a VM, repeats the backend's word for its state,
// and says where it runs.
type ServerStatus struct {
	Name  string `json:"name" yaml:"name"`
	ID    string `json:"id" yaml:"id"`
	State string `json:"state" yaml:"state"`
	Usage *Usage `json:"usage,omitempty" yaml:"usage,omitempty"`
	// Node and IP are where the server runs: its host (for pods: the node) and address; ""
	// until it has them, or when the layout has no place for them (Fields.ServerNode).
	Node string `json:"node,omitempty" yaml:"node,omitempty"`
	IP   string `json:"ip,omitempty" yaml:"ip,omitempty"`
}

// Usage is what the server consumes, as resource.Quantity strings.
type Usage struct {
	CPU    string `json:"cpu" yaml:"cpu"`
	Memory string `json:"memory" yaml:"memory"`
}

// Condition is a metav1.Condition with plain time.Time fields so that it renders the same in
// JSON patches and YAML golden files.
type Condition struct {
	Type               string          `json:"type" yaml:"type"`
	Status             ConditionStatus `json:"status" yaml:"status"`
	ObservedGeneration int64           `json:"observedGeneration,omitempty" yaml:"observedGeneration,omitempty"`
	LastTransitionTime time.Time       `json:"lastTransitionTime" yaml:"lastTransitionTime"`
	Reason             string          `json:"reason" yaml:"reason"`
	Message            string          `json:"message" yaml:"message"`
}

// ConditionUsageReported says whether status.server.usage is being reported, and why not. The
// usage poller owns it; reconciles keep it as they find it.
const ConditionUsageReported = "UsageReported"

// Condition returns a copy of the first condition of the given type, or nil
// (apimachinery's meta.FindStatusCondition).
func (s Status) Condition(t string) *Condition {
	// As meta.FindStatusCondition finds it (the first of type t), without converting the
	// whole list to metav1 to look.
	i := slices.IndexFunc(s.Conditions, func(c Condition) bool { return c.Type == t })
	if i < 0 {
		return nil
	}
	out := s.Conditions[i]
	return &out
}

// ConditionMessageLimit is the most bytes a condition's message may hold: the CRD's
// maxLength for it, metav1.Condition's. The API server refuses a status with a longer one,
// so a message past it would keep a VM's status from being written at all.
const ConditionMessageLimit = 32768

// Shorten returns s cut to at most limit bytes, on a character's boundary, ending in "..."
// when it was cut: for a message that must fit a field's limit (a condition's, an Event's
// note) whatever a user's spec put in it.
func Shorten(s string, limit int) string {
	const more = "..."
	if len(s) <= limit {
		return s
	}
	if limit <= len(more) {
		return more[:max(limit, 0)]
	}
	cut := limit - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// SetCondition returns a new list: conds with c in place of the condition of its type, or c
// appended, by apimachinery's rules (meta.SetStatusCondition): the transition time moves only
// when the status changes, and conditions of other types, which other writers may own, stay
// as they are. Further conditions of c's type, which only a damaged status holds, are dropped:
// conditions are a map keyed by type. c's message is shortened to ConditionMessageLimit.
// conds itself is not changed.
func SetCondition(conds []Condition, c Condition) []Condition {
	c.Message = Shorten(c.Message, ConditionMessageLimit)
	m := toMeta(conds)
	meta.SetStatusCondition(&m, c.meta())
	out := make([]Condition, 0, len(m))
	seen := false
	for i := range m {
		if m[i].Type == c.Type {
			if seen {
				continue
			}
			seen = true
		}
		out = append(out, fromMeta(m[i]))
	}
	return out
}

// RemoveCondition returns conds without the conditions of type t, by apimachinery's
// meta.RemoveStatusCondition (every one of that type goes): a new list, or conds itself when
// it has none of type t. conds itself is not changed; no caller changes a list in place
// (SetCondition makes a new one too), so the two may share it.
func RemoveCondition(conds []Condition, t string) []Condition {
	if !slices.ContainsFunc(conds, func(c Condition) bool { return c.Type == t }) {
		return conds // nothing to remove, and no copy: most decisions remove a condition that is not there
	}
	m := toMeta(conds)
	meta.RemoveStatusCondition(&m, t)
	out := make([]Condition, 0, len(m))
	for i := range m {
		out = append(out, fromMeta(m[i]))
	}
	return out
}

func (c Condition) meta() metav1.Condition {
	return metav1.Condition{Type: c.Type, Status: metav1.ConditionStatus(c.Status), ObservedGeneration: c.ObservedGeneration,
		LastTransitionTime: metav1.NewTime(c.LastTransitionTime), Reason: c.Reason, Message: c.Message}
}

func toMeta(conds []Condition) []metav1.Condition {
	m := make([]metav1.Condition, len(conds))
	for i, c := range conds {
		m[i] = c.meta()
	}
	return m
}

func fromMeta(c metav1.Condition) Condition {
	return Condition{Type: c.Type, Status: ConditionStatus(c.Status), ObservedGeneration: c.ObservedGeneration,
		LastTransitionTime: c.LastTransitionTime.Time, Reason: c.Reason, Message: c.Message}
}

// SameAs reports whether two statuses say the same thing, ignoring when they were written:
// lastUpdateTime, and the transition times of conditions whose status did not change. A
// controller that writes only when this is false never writes a status that changes nothing.
func (s Status) SameAs(o Status) bool {
	if s.Phase != o.Phase || s.Reason != o.Reason || s.Message != o.Message || s.ConsecutiveFailures != o.ConsecutiveFailures ||
		s.ObservedGeneration != o.ObservedGeneration || s.RestartedAt != o.RestartedAt || !s.Server.same(o.Server) ||
		!s.RootDisk.Same(o.RootDisk) || s.RunStrategyStatus != o.RunStrategyStatus || !s.Migration.Same(o.Migration) || len(s.Conditions) != len(o.Conditions) {
		return false
	}
	for i := range s.Conditions {
		c, d := s.Conditions[i], o.Conditions[i]
		c.LastTransitionTime, d.LastTransitionTime = time.Time{}, time.Time{}
		if c != d {
			return false
		}
	}
	return true
}

// same reports whether two server statuses say the same: both absent, or both present with
// the same fields and usage (absent or the same).
func (s *ServerStatus) same(o *ServerStatus) bool {
	if s == nil || o == nil {
		return s == o
	}
	if s.Name != o.Name || s.ID != o.ID || s.State != o.State || s.Node != o.Node || s.IP != o.IP || (s.Usage == nil) != (o.Usage == nil) {
		return false
	}
	return s.Usage == nil || *s.Usage == *o.Usage
}

// Same reports whether two disk statuses say the same: both absent, or both present with the
// same fields.
func (d *RootDiskStatus) Same(o *RootDiskStatus) bool {
	if d == nil || o == nil {
		return d == o
	}
	return *d == *o
}

// StatusPatch renders st as a JSON merge patch for the /status subresource: every status path
// of f is set (absent values are set to null so that stale ones are removed), and
// resourceVersion makes the write conditional on the object not having changed since the
// decision was made.
func StatusPatch(f Fields, st Status, resourceVersion string) ([]byte, error) {
	return mergePatch(statusValues(f, st, resourceVersion))
}

// statusValues are StatusPatch's paths and values.
func statusValues(f Fields, st Status, resourceVersion string) []pathValue {
	var name, id, state, node, ip any
	if st.Server != nil {
		name, id, state = st.Server.Name, st.Server.ID, st.Server.State
		if st.Server.Node != "" {
			node = st.Server.Node
		}
		if st.Server.IP != "" {
			ip = st.Server.IP
		}
	}
	var lastUpdate any
	if !st.LastUpdateTime.IsZero() {
		lastUpdate = st.LastUpdateTime.UTC().Format(time.RFC3339)
	}
	var conditions any
	if len(st.Conditions) > 0 {
		conditions = st.Conditions
	}
	var phase, message, failures, restartedAt any
	// A status without a phase (a VM paused before its first reconcile) writes none: the
	// CRD's enum allows the six phases only.
	if st.Phase != "" {
		phase = string(st.Phase)
	}
	if st.Message != "" {
		message = st.Message
	}
	if st.RestartedAt != "" {
		restartedAt = st.RestartedAt
	}
	if st.ConsecutiveFailures != 0 {
		failures = st.ConsecutiveFailures
	}
	type kv = pathValue
	values := make([]kv, 0, 32)
	values = append(values, []kv{
		{f.Phase, phase}, {f.Reason, st.Reason}, {f.Message, message},
		{f.ServerName, name}, {f.ServerID, id}, {f.ServerState, state},
		{f.ConsecutiveFailures, failures}, {f.LastUpdateTime, lastUpdate},
		{f.ObservedGeneration, st.ObservedGeneration}, {f.Conditions, conditions},
		{f.RestartedAt, restartedAt},
		{f.ServerNode, node}, {f.ServerIP, ip},
		{f.Migration, migrationJSON(st.Migration)},
	}...)
	values = append(values, st.RunStrategyStatus.values(f)...)
	// Nulling the leaves of a group one by one would leave their parents behind as empty
	// objects (status.server: {usage: {}}); where the group's fields have a parent of their
	// own, that parent goes instead.
	parents := parentsOf(f)
	drop := func(parent string) {
		if parent == "" {
			return
		}
		kept := values[:0]
		for _, e := range values {
			if e.path != "" && !inside(e.path, parent) {
				kept = append(kept, e)
			}
		}
		values = append(kept, kv{parent, nil})
	}
	switch {
	case st.Server != nil && st.Server.Usage != nil:
		values = append(values, kv{f.UsageCPU, st.Server.Usage.CPU}, kv{f.UsageMemory, st.Server.Usage.Memory})
	case st.Server == nil: // no server, no usage
		if parents.server != "" {
			drop(parents.server) // the usage's parent with it
		} else {
			values = append(values, usageRemoved(f)...)
		}
	case st.Phase != PhaseActive:
		// A VM that is not Active reports no usage (its poller has stopped and dropped its
		// series); an Active VM's usage is its poller's, which a reconcile's write leaves as
		// it finds it.
		values = append(values, usageRemoved(f)...)
	}
	if d := st.RootDisk; d != nil {
		var capacity, request any
		if d.Capacity != "" {
			capacity = d.Capacity
		}
		if d.Request != "" {
			request = d.Request
		}
		values = append(values, kv{f.RootDiskClaim, d.ClaimName}, kv{f.RootDiskPhase, d.Phase}, kv{f.RootDiskCapacity, capacity},
			kv{f.RootDiskRequest, request})
	} else {
		values = append(values, kv{f.RootDiskClaim, nil}, kv{f.RootDiskPhase, nil}, kv{f.RootDiskCapacity, nil}, kv{f.RootDiskRequest, nil})
		drop(parents.disk)
	}
	if resourceVersion != "" {
		values = append(values, kv{"metadata.resourceVersion", resourceVersion})
	}
	return values
}

// migrationJSON is the migration record as the patch writes it: null when there is none, and
// otherwise every field of the record, the ones it leaves out as null. The record is one
// object, and a merge patch merges an object into the one it finds key by key: a field the
// new record leaves out would keep the old record's value (a Refused record with the nodes of
// the move before it). A null removes it.
func migrationJSON(m *MigrationStatus) any {
	if m == nil {
		return nil
	}
	return migrationPatch{Message: orNull(m.Message), Phase: m.Phase, RequestedAt: m.RequestedAt,
		SourceNode: orNull(m.SourceNode), TargetNode: orNull(m.TargetNode)}
}

// migrationPatch is a migration record as a merge patch writes it (migrationJSON): a field
// for each of MigrationStatus's, none left out, in the order json.Marshal writes a map's keys.
type migrationPatch struct {
	Message     *string        `json:"message"`
	Phase       MigrationPhase `json:"phase"`
	RequestedAt string         `json:"requestedAt"`
	SourceNode  *string        `json:"sourceNode"`
	TargetNode  *string        `json:"targetNode"`
}

// orNull is s, or nil (null in a patch, which removes the field) when s is empty.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// serverPaths are the paths of the server's fields; rootDiskPaths, of the disk's.
func (f Fields) serverPaths() []string {
	return []string{f.ServerName, f.ServerID, f.ServerState, f.UsageCPU, f.UsageMemory, f.ServerNode, f.ServerIP}
}

// usageRemoved are the values of a patch that removes the usage: the parent object of its two
// fields where they have one of their own (status.server.usage), so that no empty object is
// left behind (usage: {}) and the usage is gone from the status as docs/usage.md says; else
// each field. A merge patch's null removes an object as it does a leaf. With a field left out
// of the layout the other's parent may hold more than the layout knows of, and stays.
func usageRemoved(f Fields) []pathValue {
	if f.UsageCPU != "" && f.UsageMemory != "" {
		if parent := ownParent(f, []string{f.UsageCPU, f.UsageMemory}); parent != "" {
			return []pathValue{{parent, nil}}
		}
	}
	return []pathValue{{f.UsageCPU, nil}, {f.UsageMemory, nil}}
}

func (f Fields) rootDiskPaths() []string {
	return []string{f.RootDiskClaim, f.RootDiskPhase, f.RootDiskCapacity, f.RootDiskRequest}
}

// ownParent is the deepest path under status that holds every path of group and no other
// status field of f, or "" when there is none (the group's fields sit beside others).
func ownParent(f Fields, group []string) string {
	var common []string
	for _, p := range group {
		if p == "" {
			continue
		}
		segs := splitPath(p)
		if common == nil {
			common = segs[:len(segs)-1]
			continue
		}
		n := 0
		for n < len(common) && n < len(segs)-1 && common[n] == segs[n] {
			n++
		}
		common = common[:n]
	}
	if len(common) < 2 { // "status" itself, or nothing shared
		return ""
	}
	parent := strings.Join(common, ".")
	in := map[string]bool{}
	for _, p := range group {
		in[p] = true
	}
	for _, p := range f.Paths() {
		if !p.status() || in[p.Path] {
			continue
		}
		if p.Path == parent || strings.HasPrefix(p.Path, parent+".") {
			return ""
		}
	}
	return parent
}

// setPath sets a dotted path in a nested map, creating the maps on the way. Two paths that
// collide (one a prefix of the other) are a field-map error, reported rather than overwritten:
// that is why it is not unstructured.SetNestedField, which overwrites a value at the path and
// replaces a null on the way with a map, so that one path of a field map would silently
// drop another's value.
func setPath(root map[string]any, path string, v any) error {
	segs := strings.Split(path, ".")
	m := root
	for _, s := range segs[:len(segs)-1] {
		next, ok := m[s]
		if !ok {
			child := map[string]any{}
			m[s] = child
			m = child
			continue
		}
		child, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("status path %q crosses another status field", path)
		}
		m = child
	}
	last := segs[len(segs)-1]
	if _, taken := m[last]; taken {
		return fmt.Errorf("status path %q is given twice", path)
	}
	m[last] = v
	return nil
}

// UsagePatch renders a usage report as a JSON merge patch for the /status subresource: the
// usage paths, or with u nil the usage removed (usageRemoved), and the conditions when conds
// is not nil. Only a patch that replaces the conditions list carries resourceVersion, so that
// it cannot undo a concurrent change of another condition; a usage-only patch touches nothing
// else and needs none.
func UsagePatch(f Fields, u *Usage, conds []Condition, resourceVersion string) ([]byte, error) {
	var values []pathValue
	if u != nil {
		values = []pathValue{{f.UsageCPU, u.CPU}, {f.UsageMemory, u.Memory}}
	} else {
		values = usageRemoved(f)
	}
	if conds != nil {
		values = append(values, pathValue{f.Conditions, conds})
		if resourceVersion != "" {
			values = append(values, pathValue{"metadata.resourceVersion", resourceVersion})
		}
	}
	return mergePatch(values)
}

// Pausing a VM: the controller keeps its hands off it while someone repairs it by hand, in the
// manner of Cluster API's and Crossplane's paused annotations (docs/lifecycle.md).
const (
	// AnnotationPaused, set to "true", pauses the VM: no server is created, replaced,
	// resized or deleted, the finalizer stays, and of the status only ConditionPaused is
	// written. Deletion waits until it is gone. Any other value, or none, is not paused.
	AnnotationPaused = "cloudnative.czs/paused"
	// ConditionPaused is True while the VM is paused, with a message that says how to
	// resume; it goes when the VM is resumed.
	ConditionPaused = "Paused"
)
