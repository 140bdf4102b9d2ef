package strictyaml

import (
	"errors"
	"io"
	"strings"
	"testing"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// TestDecode: a document is decoded with unknown keys refused, an empty input is io.EOF, and
// a document on which yaml.v3 panics is an error.
func TestDecode(t *testing.T) {
	type target struct {
		A string `yaml:"a"`
	}
	tests := map[string]struct {
		doc  string
		want target
		err  string // "": none; "EOF": io.EOF
	}{
		"a document":     {doc: "a: x\n", want: target{A: "x"}},
		"an unknown key": {doc: "b: x\n", err: "field b not found"},
		"empty":          {doc: "", err: "EOF"},
		// yaml.v3 panics merging into a struct a mapping with a list as a key.
		"a list as a key beside a merge":    {doc: "? [a]\n: b\n<<: {}\n", err: "yaml: line 1: a key that is a list or a mapping is not supported"},
		"a mapping as a key beside a merge": {doc: "a: x\n? {k: v}\n: b\n<<: {}\n", err: "yaml: line 2: a key that is a list or a mapping is not supported"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got target
			err := NewDecoder([]byte(tc.doc)).Decode(&got)
			switch {
			case tc.err == "EOF":
				if !errors.Is(err, io.EOF) {
					t.Fatalf("Decode = %v, want io.EOF", err)
				}
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Decode = %v, want an error saying %q", err, tc.err)
				}
			case err != nil || got != tc.want:
				t.Fatalf("Decode = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestDecodeLaterDocument: the line named is the key's in the whole input, in the document
// the decoder panicked on, not the first such key of the input; and an alias of a list as a
// key counts as the list.
func TestDecodeLaterDocument(t *testing.T) {
	type target struct {
		A string `yaml:"a"`
	}
	// The first document has a list as a key too, without a merge key: the decoder refuses it
	// without a panic (a key the target does not have).
	dec := NewDecoder([]byte("a: x\n? [q]\n: r\n---\na: y\n? [a]\n: b\n<<: {}\n"))
	var first, second target
	if err := dec.Decode(&first); err == nil || strings.Contains(err.Error(), "a key that is a list") {
		t.Fatalf("first document: %v, want the decoder's own refusal", err)
	}
	if err := dec.Decode(&second); err == nil || err.Error() != "yaml: line 6: a key that is a list or a mapping is not supported" {
		t.Fatalf("second document: %v, want the key's line", err)
	}
	var v target
	err := NewDecoder([]byte("x: &l [a]\n? *l\n: b\n<<: {}\n")).Decode(&v)
	if err == nil || err.Error() != "yaml: line 2: a key that is a list or a mapping is not supported" {
		t.Fatalf("an alias of a list as a key: %v, want its line", err)
	}
}
