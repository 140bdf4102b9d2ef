// Package convert converts VirtualMachine objects between API versions whose layouts field
// maps describe: it reads an object with the source version's map and writes it with the
// target's. Conversion is data, not code: a new version needs a field map, not a converter.
//
// Conversion is lossless in both directions. What has no home in the target version (a field
// the target's map does not place, an action value the target has no word for, any field no
// map knows) is kept, as JSON, in the annotation FieldsAnnotation(source version) of the
// converted object, and restored from it when the object is converted back, as Kubernetes
// keeps autoscaling/v2's metrics in an annotation of autoscaling/v1's objects. So
// v1alpha1 -> v1 -> v1alpha1 gives back the object it started from, and so does
// v1 -> v1alpha1 -> v1.
//
// The annotations FieldsAnnotation(v) are reserved for this: an object carrying the one of its
// own version loses it on conversion. One that is not a JSON object cannot be restored; it is
// kept both ways, as it is or, when the fields the target cannot hold need its name, with them
// (at metadata.annotations, put back on the way back), and Convert notes it (docs/versions.md).
//
// Any client that may write an object may write its annotations, and the API server does not
// validate what a conversion gives it. So what an annotation holds is restored only as far as
// a conversion can have kept it there: what the source version's map has a place for (a
// conversion moves it), an action word the source can say, and metadata but the object's own
// unreadable annotation are dropped, and Convert notes it
// (docs/field-maps-and-versions.md, "What the annotations of kept fields may hold").
package convert
