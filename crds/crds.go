// Package crds embeds the project's CustomResourceDefinitions so that the binary can print
// them (vm-controller crds | kubectl apply -f -) and tests can apply exactly what ships.
package crds

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// YAML returns every CRD manifest, in name order, as one multi-document YAML stream.
func YAML() ([]byte, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		data, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return []byte(b.String()), nil
}
