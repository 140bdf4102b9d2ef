package schema

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualMachine is a read-only view of one VirtualMachine object. It holds the object's JSON
// and reads each field on demand at the path its Fields give; it never decodes the whole
// object into Go structs and never aliases the informer's cached map, so it is safe to keep
// after the cache moves on.
type VirtualMachine struct {
	raw    []byte
	fields Fields
	// resourceVersion is kept apart from raw: the informer's cached form (vmcache.Object)
	// leaves it out of its JSON, so that two versions that differ in nothing else compare
	// equal byte for byte.
	resourceVersion string
}

// Parse makes a view of a JSON object (a file, an API response). It fails only when raw is not
// a JSON object; field problems are reported by Spec. Views of the informer's cached objects
// come from ViewOf.
func Parse(raw []byte, f Fields) (VirtualMachine, error) {
	if !gjson.ValidBytes(raw) || !gjson.ParseBytes(raw).IsObject() {
		return VirtualMachine{}, fmt.Errorf("not a JSON object")
	}
	return VirtualMachine{raw: raw, fields: f, resourceVersion: gjson.GetBytes(raw, "metadata.resourceVersion").String()}, nil
}

// ViewOf makes a view of JSON the caller made itself and vouches for, without the check Parse
// makes: the informer's cached form (vmcache.Object) marshals each object once and then
// reads it on every reconcile. resourceVersion is passed apart because that form leaves it out
// of raw (see VirtualMachine.resourceVersion). raw is shared, not copied: nobody may change it.
func ViewOf(raw []byte, resourceVersion string, f Fields) VirtualMachine {
	return VirtualMachine{raw: raw, fields: f, resourceVersion: resourceVersion}
}

// Fields returns the layout this view reads with.
func (vm VirtualMachine) Fields() Fields { return vm.fields }

// JSON returns the object as JSON (for a cached object: the part of it the view reads, without
// resourceVersion). Callers must not modify it.
func (vm VirtualMachine) JSON() []byte { return vm.raw }

// get reads the value at path; an empty path (a field the layout has no place for) reads as
// absent, as in getAll, never as an object's "" key.
func (vm VirtualMachine) get(path string) gjson.Result {
	if path == "" {
		return gjson.Result{}
	}
	return gjson.GetBytes(vm.raw, gjsonPath(path))
}

func (vm VirtualMachine) str(path string) string { return vm.get(path).String() }

// getAll reads several paths in one pass over the object, each as get would read it; an empty
// path reads as absent. A reconcile reads a dozen status fields, and gjson, asked for each
// apart, scans the object from its start every time: most of a no-op reconcile's CPU before.
//
// It fills out, one value per path, which the caller gives so that the values can live on its
// stack; out must be as long as paths. The values are read in place: their strings share raw's
// memory, which nobody may change (ViewOf), instead of a copy of the whole object made for each
// call (gjson.ParseBytes copies), which was the largest part of what a decision allocated.
func (vm VirtualMachine) getAll(out []gjson.Result, paths ...string) {
	clear(out)
	var room [maxPaths]wanted
	pending := room[:0]
	for i, p := range paths {
		if p != "" {
			pending = append(pending, wanted{i, p})
		}
	}
	scratch := scratchPool.Get().(*[]wanted)
	*scratch = (*scratch)[:0]
	collect(gjson.Parse(unsafe.String(unsafe.SliceData(vm.raw), len(vm.raw))), pending, out, scratch)
	scratchPool.Put(scratch)
}

// scratchPool holds getAll's scratch buffers: the walk's closures make a buffer of its own
// escape to the heap, which was a third of what a decision allocated (a kilobyte for each
// Status).
var scratchPool = sync.Pool{New: func() any { s := make([]wanted, 0, 2*maxPaths); return &s }}

// maxPaths is the most paths one getAll is asked for (Spec's and Status's), below which its
// bookkeeping stays on the stack; more still work, through the heap.
const maxPaths = 32

// wanted is a path of getAll still to be found: its place in the answer, and its keys below
// the object being walked.
type wanted struct {
	i    int
	rest string
}

// collect hands each member of obj to the pending paths whose next key it is: a member that
// ends a path is its value, one that does not is walked in turn. As gjson does, the first
// member of a key is the one read. What is not an object is left to gjson.
//
// The paths still to be found below a member go on scratch, above what the walk above it
// holds there, and come off once that member is walked: one buffer for the whole walk.
func collect(obj gjson.Result, pending []wanted, out []gjson.Result, scratch *[]wanted) {
	if len(pending) == 0 {
		return
	}
	if !obj.IsObject() {
		for _, w := range pending {
			out[w.i] = obj.Get(gjsonPath(w.rest))
		}
		return
	}
	obj.ForEach(func(key, value gjson.Result) bool {
		mark := len(*scratch)
		n := 0
		k := key.Str
		for _, w := range pending {
			switch {
			case !strings.HasPrefix(w.rest, k) || len(w.rest) > len(k) && w.rest[len(k)] != '.':
				pending[n] = w
				n++
			case len(w.rest) > len(k):
				*scratch = append(*scratch, wanted{w.i, w.rest[len(k)+1:]})
			default:
				out[w.i] = value
			}
		}
		pending = pending[:n]
		if end := len(*scratch); end > mark {
			collect(value, (*scratch)[mark:end:end], out, scratch)
		}
		*scratch = (*scratch)[:mark]
		return n > 0
	})
}

// APIVersion is the object's apiVersion.
func (vm VirtualMachine) APIVersion() string { return vm.str("apiVersion") }

// Kind is the object's kind.
func (vm VirtualMachine) Kind() string { return vm.str("kind") }

// Namespace is the object's namespace.
func (vm VirtualMachine) Namespace() string { return vm.str("metadata.namespace") }

// Name is the object's name.
func (vm VirtualMachine) Name() string { return vm.str("metadata.name") }

// UID is the object's UID, which ties its server to this incarnation of the name.
func (vm VirtualMachine) UID() types.UID { return types.UID(vm.str("metadata.uid")) }

// ResourceVersion is the version of the object this view was made from; writes use it as a
// precondition so that a decision made on a stale view is refused, not applied.
func (vm VirtualMachine) ResourceVersion() string { return vm.resourceVersion }

// Generation is metadata.generation: it moves with every spec change.
func (vm VirtualMachine) Generation() int64 { return vm.get("metadata.generation").Int() }

// Deleting reports whether deletion has been requested (metadata.deletionTimestamp is set).
func (vm VirtualMachine) Deleting() bool { return vm.get("metadata.deletionTimestamp").Exists() }

// Finalizers returns metadata.finalizers.
func (vm VirtualMachine) Finalizers() []string {
	var out []string
	for _, f := range vm.get("metadata.finalizers").Array() {
		out = append(out, f.String())
	}
	return out
}

// HasFinalizer reports whether name is among the finalizers.
func (vm VirtualMachine) HasFinalizer(name string) bool {
	for _, f := range vm.Finalizers() {
		if f == name {
			return true
		}
	}
	return false
}

// Status decodes the status the object currently carries. Fields that are absent or of the
// wrong type read as zero values: a status is the controller's own output, and a damaged one
// is simply rewritten.
func (vm VirtualMachine) Status() Status {
	f := vm.fields
	var v [23]gjson.Result
	vm.getAll(v[:], f.Phase, f.Reason, f.Message, f.ConsecutiveFailures, f.ObservedGeneration, f.LastUpdateTime, f.RestartedAt,
		f.ServerName, f.ServerID, f.ServerState, f.UsageCPU, f.UsageMemory, f.Conditions,
		f.RootDiskClaim, f.RootDiskPhase, f.RootDiskCapacity, f.ServerNode, f.ServerIP,
		f.NextRetryTime, f.StartRequestedAt, f.StopRequestedAt, // the run strategies' (runstrategy.go)
		f.Migration, f.RootDiskRequest)
	st := Status{
		Phase:               Phase(v[0].String()),
		Reason:              v[1].String(),
		Message:             v[2].String(),
		ConsecutiveFailures: int(v[3].Int()),
		ObservedGeneration:  v[4].Int(),
		LastUpdateTime:      parseTime(v[5].String()),
		RestartedAt:         v[6].String(),
	}
	if name, id, state := v[7], v[8], v[9]; name.Exists() || id.Exists() || state.Exists() {
		st.Server = &ServerStatus{Name: name.String(), ID: id.String(), State: state.String()}
	}
	if node, ip := v[16], v[17]; node.Exists() || ip.Exists() {
		if st.Server == nil {
			st.Server = &ServerStatus{}
		}
		st.Server.Node, st.Server.IP = node.String(), ip.String()
	}
	if cpu, mem := v[10], v[11]; cpu.Exists() || mem.Exists() {
		if st.Server == nil {
			st.Server = &ServerStatus{}
		}
		st.Server.Usage = &Usage{CPU: cpu.String(), Memory: mem.String()}
	}
	for _, c := range v[12].Array() {
		st.Conditions = append(st.Conditions, conditionOf(c))
	}
	if claim, phase, capacity, request := v[13], v[14], v[15], v[22]; claim.Exists() || phase.Exists() || capacity.Exists() || request.Exists() {
		st.RootDisk = &RootDiskStatus{ClaimName: claim.String(), Phase: phase.String(), Capacity: capacity.String(), Request: request.String()}
	}
	st.RunStrategyStatus = runStrategyStatus(v[18], v[19], v[20])
	st.Migration = migrationOf(v[21])
	return st
}

// conditionOf reads one condition of the list, in one pass over it. The first member of a key
// counts, as with gjson's Get.
func conditionOf(c gjson.Result) Condition {
	var out Condition
	var seen [6]bool
	first := func(i int) bool { f := !seen[i]; seen[i] = true; return f }
	c.ForEach(func(key, value gjson.Result) bool {
		switch key.Str {
		case "type":
			if first(0) {
				out.Type = value.String()
			}
		case "status":
			if first(1) {
				out.Status = ConditionStatus(value.String())
			}
		case "observedGeneration":
			if first(2) {
				out.ObservedGeneration = value.Int()
			}
		case "lastTransitionTime":
			if first(3) {
				out.LastTransitionTime = parseTime(value.String())
			}
		case "reason":
			if first(4) {
				out.Reason = value.String()
			}
		case "message":
			if first(5) {
				out.Message = value.String()
			}
		}
		return true
	})
	return out
}

// RestartRequested is the value of the restart annotation, or "" when it is not set or the
// layout has no status field to record a restart in (Fields.RestartedAt).
func (vm VirtualMachine) RestartRequested() string {
	if vm.fields.RestartedAt == "" {
		return ""
	}
	return gjson.GetBytes(vm.raw, restartAnnotationPath).String()
}

// restartAnnotationPath is the gjson path of the restart annotation.
var restartAnnotationPath = "metadata.annotations." + escapeGJSON(AnnotationRestartedAt)

// Paused reports whether the VM carries AnnotationPaused with the value "true".
func (vm VirtualMachine) Paused() bool {
	return gjson.GetBytes(vm.raw, pausedAnnotationPath).String() == "true"
}

// pausedAnnotationPath is the gjson path of the pause annotation.
var pausedAnnotationPath = "metadata.annotations." + escapeGJSON(AnnotationPaused)

// Phase reads status.phase alone, without decoding the rest of the status: metrics count
// phases over the whole cache at each scrape.
func (vm VirtualMachine) Phase() Phase { return Phase(vm.str(vm.fields.Phase)) }

// Reason reads status.reason alone, as Phase reads status.phase: metrics count VMs by phase
// and reason over the whole cache at each scrape. The string shares the view's bytes.
func (vm VirtualMachine) Reason() string { return vm.str(vm.fields.Reason) }

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{} // most times are unset: time.Parse would make an error to say so
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// restartAnnotationKey is the gjson path of the restart annotation below metadata.
var restartAnnotationKey = "annotations." + escapeGJSON(AnnotationRestartedAt)

// Settled reports whether the status describes the VM as it is: it has a phase, the VM is not
// being deleted, the status observed its generation, and no restart, start, stop or migration
// request waits (RestartRequested is the one status.restartedAt records, MigrateRequested the
// one status.migration does; likewise the others). A VM that is not settled has work
// its users asked for; the controller looks at such VMs of its first list before the others.
//
// The VM cache asks it of every VM it stores, so it reads without decoding the status and
// without copying what it reads (each value is compared and dropped at once), and it scans
// the object once for the metadata and once for the status fields' common parent, instead of
// once per field.
func (vm VirtualMachine) Settled() bool {
	raw := unsafe.String(unsafe.SliceData(vm.raw), len(vm.raw))
	f := vm.fields
	md := gjson.Get(raw, "metadata")
	if md.Get("deletionTimestamp").Exists() {
		return false
	}
	paths := []string{f.Phase, f.ObservedGeneration, f.RestartedAt, f.StartRequestedAt, f.StopRequestedAt}
	in := raw
	if parent := commonParent(paths); parent != "" {
		in = gjson.Get(raw, gjsonPath(parent)).Raw
		for i, p := range paths {
			if p != "" {
				paths[i] = p[len(parent)+1:]
			}
		}
	}
	get := func(path string) gjson.Result { return gjson.Get(in, gjsonPath(path)) }
	if get(paths[0]).Str == "" || md.Get("generation").Int() != get(paths[1]).Int() {
		return false
	}
	// A request waits while its annotation has a value its status field does not record; a
	// layout without the field cannot record it, so none is asked for there.
	waits := func(key, path string) bool {
		if path == "" {
			return false
		}
		r := md.Get(key).Str
		return r != "" && r != get(path).Str
	}
	return !waits(restartAnnotationKey, paths[2]) && !waits(startAnnotationKey, paths[3]) && !waits(stopAnnotationKey, paths[4]) &&
		!migrationWaits(raw, md, f)
}

// startAnnotationKey and stopAnnotationKey are the gjson paths of the start and stop requests
// below metadata.
var (
	startAnnotationKey = "annotations." + escapeGJSON(AnnotationStartRequestedAt)
	stopAnnotationKey  = "annotations." + escapeGJSON(AnnotationStopRequestedAt)
)

// commonParent is the longest dotted path that holds every non-empty path of paths below it,
// or "" when they share none.
func commonParent(paths []string) string {
	parent := ""
	first := true
	for _, p := range paths {
		if p == "" {
			continue
		}
		dir := ""
		if i := strings.LastIndexByte(p, '.'); i > 0 {
			dir = p[:i]
		}
		if first {
			parent, first = dir, false
			continue
		}
		for parent != "" && dir != parent && !strings.HasPrefix(dir, parent+".") {
			i := strings.LastIndexByte(parent, '.')
			if i < 0 {
				parent = ""
				break
			}
			parent = parent[:i]
		}
	}
	return parent
}
