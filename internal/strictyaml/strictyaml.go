// Package strictyaml decodes the YAML documents users hand the commands (a field map, the
// plan command's server, disk, budget, nodes and gone server) into structs, unknown keys
// refused. It is yaml.v3's decoder with one difference: a document on which the decoder
// panics is an error, not a crash. yaml.v3 panics on some documents decoded into a struct (a
// merge key, <<, in a mapping that also has a list as a key: "hash of unhashable type"); a
// file a user wrote wrong must get one line that says so in the file's terms (the line of the
// key it cannot take), from every command that reads one.
package strictyaml

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"
)

// Decoder reads the documents of one input in turn.
type Decoder struct {
	dec  *yaml.Decoder
	data []byte
}

// NewDecoder returns a decoder of data that refuses keys its target does not have
// (yaml.v3's KnownFields).
func NewDecoder(data []byte) *Decoder {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	return &Decoder{dec: dec, data: data}
}

// Decode decodes the next document into v, as yaml.v3's Decode does (io.EOF when there is
// none); a panic of the decoder is returned as an error that starts "yaml: ", as its own
// errors do, and says in the file's terms what the decoder could not take where it can tell
// (complexKey), in the decoder's words otherwise.
func (d *Decoder) Decode(v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if line := complexKey(d.data); line > 0 {
				err = fmt.Errorf("yaml: line %d: a key that is a list or a mapping is not supported", line)
				return
			}
			err = fmt.Errorf("yaml: cannot decode this document: %v", r)
		}
	}()
	return d.dec.Decode(v)
}

// complexKey is the line of the first key in data that is a list or a mapping (the cause of
// yaml.v3's panic beside a merge key), 0 when there is none or data does not parse. Reading
// into nodes hashes no key, so it does not panic where decoding into a struct does.
func complexKey(data []byte) int {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return 0
		}
		if line := complexKeyIn(&doc); line > 0 {
			return line
		}
	}
}

// complexKeyIn is complexKey for one node and what it holds.
func complexKeyIn(n *yaml.Node) int {
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 && (c.Kind == yaml.SequenceNode || c.Kind == yaml.MappingNode) {
			return c.Line
		}
		if line := complexKeyIn(c); line > 0 {
			return line
		}
	}
	return 0
}
