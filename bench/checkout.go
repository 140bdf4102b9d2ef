// Where the bench finds the checkout it measures.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// controllerModule is the controller's module path, which the go.mod at the checkout's root
// declares.
const controllerModule = "github.com/cloudnative-czs/vm-controller"

// checkoutRoot is the root of the checkout the bench runs in, found from the working
// directory. The bench is a module of its own (bench/go.mod: its charts' and profiles'
// libraries stay out of the controller's go.mod) and is run from bench/, so what it builds and
// reads by default (the controller, the peer, the local cluster's kubeconfig, bench/results)
// is found from the root rather than from where it runs.
var checkoutRoot = sync.OnceValues(func() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return findCheckout(wd)
})

// findCheckout is the nearest directory at or above dir whose go.mod declares the
// controller's module.
func findCheckout(dir string) (string, error) {
	for d := dir; ; {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == controllerModule {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no checkout of %s at or above %s: run the bench inside the checkout (cd bench && go run . ...)", controllerModule, dir)
		}
		d = parent
	}
}

// modulePath is the path the module line of the go.mod file gomod declares, "" if none.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			rest, _, _ = strings.Cut(rest, "//")
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// buildController builds the checkout's controller into out/vm-controller and returns its
// path.
func buildController(out string) (string, error) {
	root, err := checkoutRoot()
	if err != nil {
		return "", err
	}
	return buildBinary(out, "vm-controller", root)
}
