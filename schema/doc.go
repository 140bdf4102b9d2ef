// Package schema knows what a VirtualMachine looks like: where each field lives in each CRD
// version (field maps), typed views decoded on demand from the raw object with gjson, spec
// validation, and the status rendered as a merge patch (StatusPatch, UsagePatch) with its
// conditions. It does not know where the resource is served (package crds), how the informer
// caches it (package reconcile/vmcache), or what to decide (package reconcile/decision).
//
// Nothing here is generated. Every field path the controller reads or writes is declared once
// per layout, in a field-map file read into a Fields value: the maps of this project's
// versions are embedded (fieldmaps/), and a user's map for another CRD is read at start, so
// that the same binary can drive another version or another CRD whose fields sit elsewhere.
// Views never copy the whole object into Go structs: each accessor reads the one path it
// needs.
package schema
