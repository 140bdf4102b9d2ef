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
	"strings"

	"gopkg.in/yaml.v3"
)

// Decoder reads the documents of one input in turn.
type Decoder struct {
	dec  *yaml.Decoder
	data []byte
	n    int // the documents Decode was asked for so far
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
// errors do. For the panic over a key that is a list or a mapping (yaml.v3's "hash of
// unhashable type") the error names the key's line in the input (complexKey); any other
// panic is in the decoder's own words.
func (d *Decoder) Decode(v any) (err error) {
	doc := d.n
	d.n++
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok && strings.Contains(e.Error(), "unhashable") {
				if line := complexKey(d.data, doc); line > 0 {
					err = fmt.Errorf("yaml: line %d: a key that is a list or a mapping is not supported", line)
					return
				}
			}
			err = fmt.Errorf("yaml: cannot decode this document: %v", r)
		}
	}()
	return d.dec.Decode(v)
}

// complexKey is the line of the first key that is a list or a mapping in the document of data
// numbered doc (from 0), 0 when there is none or data does not parse. Reading into nodes hashes
// no key, so it does not panic where decoding into a struct does.
func complexKey(data []byte, doc int) int {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			return 0
		}
		if i == doc {
			return complexKeyIn(&n, 0)
		}
	}
}

// complexKeyIn is complexKey for one node and what it holds; a key that is an alias counts as
// what it stands for (the walk does not go into an alias, whose node is walked where it is
// written). depth bounds the nesting walked: a key deeper than that gets the decoder's words.
func complexKeyIn(n *yaml.Node, depth int) int {
	if depth > 100 {
		return 0
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			k := c
			if k.Kind == yaml.AliasNode && k.Alias != nil {
				k = k.Alias
			}
			if k.Kind == yaml.SequenceNode || k.Kind == yaml.MappingNode {
				return c.Line
			}
		}
		if line := complexKeyIn(c, depth+1); line > 0 {
			return line
		}
	}
	return 0
}
