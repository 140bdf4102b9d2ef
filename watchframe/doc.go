// Package watchframe decodes a watch stream one event at a time, for the informers whose
// ListerWatchers read objects straight from the bytes on the wire instead of through
// client-go's decoders: the VMs' (JSON, reconcile/vmcache) and the server pods'
// (protobuf, backend/pods).
//
// Why a package: those two decoders were two copies of one skeleton, and the skeleton holds
// the rules both must keep. It reads the next frame, splits it into the event's type and
// object, makes the type one of client-go's constants (never a string of the frame's bytes,
// which the next frame overwrites while the event is still on its way to the reflector),
// decodes the object, or the Status of an ERROR event, and names the event in every error;
// Watch hands the decoder to client-go's StreamWatcher as client-go's own REST watch does.
// What differs between encodings (how a frame is cut, where an event's type and object are,
// how an object is read into the informer's cached form) is a Format, kept with its caller.
package watchframe
