// Package strictyaml decodes the YAML documents users hand the commands (a field map, the
// plan command's server, disk, budget, nodes and gone server) into structs, unknown keys
// refused. It is yaml.v3's decoder with one difference: a document on which the decoder
// panics is an error, not a crash. yaml.v3 panics on some documents decoded into a struct (a
// merge key, <<, in a mapping that also has a list as a key: "hash of unhashable type"); a
// file a user wrote wrong must get one line that says so, from every command that reads one.
package strictyaml

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"
)

// Decoder reads the documents of one input in turn.
type Decoder struct {
	dec *yaml.Decoder
}

// NewDecoder returns a decoder of data that refuses keys its target does not have
// (yaml.v3's KnownFields).
func NewDecoder(data []byte) *Decoder {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return &Decoder{dec: dec}
}

// Decode decodes the next document into v, as yaml.v3's Decode does (io.EOF when there is
// none); a panic of the decoder is returned as an error that starts "yaml: ", as its own
// errors do.
func (d *Decoder) Decode(v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: cannot decode this document: %v", r)
		}
	}()
	return d.dec.Decode(v)
}
