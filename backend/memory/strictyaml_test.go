package memory

import (
	"strings"
	"testing"
	"time"
)

// TestParseDocumentDecoderPanicsOn: a document on which the YAML decoder panics (a list as a
// key beside a merge key) is an error of one line from each parser of the plan command's
// inputs, not a crash.
func TestParseDocumentDecoderPanicsOn(t *testing.T) {
	const doc = "? [a]\n: b\n<<: {}\n"
	parsers := map[string]func([]byte) error{
		"server": func(b []byte) error { _, err := ParseServer(b, time.Unix(0, 0)); return err },
		"disk":   func(b []byte) error { _, err := ParseDisk(b); return err },
		"gone":   func(b []byte) error { _, err := ParseGone(b); return err },
		"budget": func(b []byte) error { _, err := ParseBudget(b); return err },
		"nodes": func(b []byte) error {
			_, err := ParseHosts([]byte("- " + strings.ReplaceAll(string(b), "\n", "\n  ")))
			return err
		},
	}
	for name, parse := range parsers {
		t.Run(name, func(t *testing.T) {
			err := parse([]byte(doc))
			if err == nil || !strings.Contains(err.Error(), "a key that is a list or a mapping is not supported") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("parse = %v, want one line saying a list as a key is not supported", err)
			}
		})
	}
}
