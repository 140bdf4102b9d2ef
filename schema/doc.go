// Package schema knows what a VirtualMachine looks like: the GroupVersionResource it is served
// at, where each field lives in each CRD version, typed views decoded on demand from the raw
// object with gjson, spec validation, and the status rendered as a patch.
//
// Nothing here is generated. Every field path the controller reads or writes is declared once,
// in a Fields value, so that the same binary can drive another version or another CRD whose
// fields sit elsewhere. Views never copy the whole object into Go structs: each accessor reads
// the one path it needs.
package schema
