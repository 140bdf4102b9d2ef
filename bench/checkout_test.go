package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFindCheckout: the bench, a module of its own run from bench/ or below it, finds the
// controller's checkout at the nearest go.mod that declares the controller's module, passing
// over its own go.mod and the peer's; elsewhere it says where to run it.
func TestFindCheckout(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{".", "peer", filepath.Join("chart", "testdata")} {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, err := findCheckout(abs)
		if err != nil || got != root {
			t.Errorf("findCheckout(%s) = %q, %v; want %s", dir, got, err, root)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "main.go")); err != nil {
		t.Errorf("the checkout %s has no controller: %v", root, err)
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := findCheckout(other); err == nil {
		t.Errorf("findCheckout outside the checkout = %q, want an error", got)
	}
}

// TestModulePath reads the module line however go.mod spells it, and no other line.
func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module " + controllerModule + "\n\ngo 1.26.0\n":            controllerModule,
		"// a comment\nmodule\t\"" + controllerModule + "\" // x\n": controllerModule,
		"module " + controllerModule + "/bench\n":                   controllerModule + "/bench",
		"modulex example.com/x\n":                                   "",
		"go 1.26.0\n":                                               "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDefaultResults: run from bench/, results go to the checkout's bench/results.
func TestDefaultResults(t *testing.T) {
	if got := defaultResults(); got != "results" {
		t.Errorf("defaultResults() from bench/ = %q, want results", got)
	}
}
