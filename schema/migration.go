package schema

import (
	"encoding/json"

	"github.com/tidwall/gjson"
)

// Cold migration on request: the server is stopped and started on another node, with the same
// disk (docs/placement.md). `kubectl vm migrate NAME` writes the annotation; it can be
// written by hand too.

// AnnotationMigrateRequestedAt asks for a migration of the VM's server, in the manner of the
// restart annotation: each new value (an RFC 3339 time, by convention) is acted on once, and
// status.migration records the value acted on and how it went.
const AnnotationMigrateRequestedAt = "cloudnative.czs/migrateRequestedAt"

// MigrationPhase is where a migration stands.
type MigrationPhase string

// The phases of a migration.
const (
	// MigrationMoving: the server on SourceNode is being deleted, or the next one, which
	// may not run there, is on its way.
	MigrationMoving MigrationPhase = "Moving"
	// MigrationSucceeded: the new server runs and is ready on TargetNode.
	MigrationSucceeded MigrationPhase = "Succeeded"
	// MigrationRefused: nothing was changed; Message says why.
	MigrationRefused MigrationPhase = "Refused"
	// MigrationFailed: no node other than SourceNode took the next server in time; it was
	// deleted, and the VM runs again wherever it fits, SourceNode included.
	MigrationFailed MigrationPhase = "Failed"
)

// MigrationStatus is status.migration: the last migration asked for and where it stands.
type MigrationStatus struct {
	// RequestedAt is the value of AnnotationMigrateRequestedAt this record is for.
	RequestedAt string         `json:"requestedAt" yaml:"requestedAt"`
	Phase       MigrationPhase `json:"phase" yaml:"phase"`
	SourceNode  string         `json:"sourceNode,omitempty" yaml:"sourceNode,omitempty"`
	TargetNode  string         `json:"targetNode,omitempty" yaml:"targetNode,omitempty"`
	Message     string         `json:"message,omitempty" yaml:"message,omitempty"`
}

// Same reports whether two records say the same: both absent, or equal.
func (m *MigrationStatus) Same(o *MigrationStatus) bool {
	if m == nil || o == nil {
		return m == o
	}
	return *m == *o
}

// MigrateRequested is the value of the migrate annotation, or "" when it is not set or the
// layout has no status field to record a migration in (Fields.Migration).
func (vm VirtualMachine) MigrateRequested() string {
	if vm.fields.Migration == "" {
		return ""
	}
	return gjson.GetBytes(vm.raw, migrateAnnotationPath).String()
}

// migrateAnnotationPath is the gjson path of the migrate annotation.
var migrateAnnotationPath = "metadata.annotations." + escapeGJSON(AnnotationMigrateRequestedAt)

// migrateAnnotationKey is the gjson path of the migrate annotation below metadata.
var migrateAnnotationKey = "annotations." + escapeGJSON(AnnotationMigrateRequestedAt)

// migrationWaits reports whether the object raw, whose metadata is md, asks for a migration
// its status has not recorded (for Settled). Only an object with the annotation reads its
// status for it.
func migrationWaits(raw string, md gjson.Result, f Fields) bool {
	if f.Migration == "" {
		return false
	}
	req := md.Get(migrateAnnotationKey).Str
	return req != "" && req != gjson.Get(raw, gjsonPath(f.Migration)+".requestedAt").Str
}

// migrationOf reads status.migration; a record that does not read is none (the status is the
// controller's own output, rewritten when damaged).
func migrationOf(v gjson.Result) *MigrationStatus {
	if !v.IsObject() {
		return nil
	}
	var m MigrationStatus
	if err := json.Unmarshal([]byte(v.Raw), &m); err != nil || m.RequestedAt == "" {
		return nil
	}
	return &m
}
