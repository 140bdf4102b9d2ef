package main

import (
	"archive/tar"
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds vm-controller the way `make image` does, builds the image around it,
// then reads the tarball back as docker load would: the config must run the binary as
// the non-root user with the OCI labels, and the binary found in the layers must print
// the version it was stamped with.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("the image holds a linux binary; this host runs %s and cannot execute it", runtime.GOOS)
	}
	const version = "v0.0.0-imagetest"
	dir := t.TempDir()
	bin := filepath.Join(dir, "linux-"+runtime.GOARCH, "vm-controller")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+version, "-o", bin, ".")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out := filepath.Join(dir, "out")
	paths, err := Build(Options{Version: version, Binaries: []string{runtime.GOARCH + "=" + bin},
		Created: created, OutDir: out, OCILayout: true})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(paths) != 1 {
		t.Fatalf("Build wrote %d tarballs, want 1: %v", len(paths), paths)
	}

	// The tarball is what docker load reads: its manifest must name the tag.
	tag, err := name.NewTag(Repository + ":" + version)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(paths[0], &tag)
	if err != nil {
		t.Fatalf("read tarball %s as %s: %v", paths[0], tag, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatalf("read config: %v", err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform = %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user = %q, want 65532:65532 (non-root)", cf.Config.User)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != Binary {
		t.Errorf("entrypoint = %q, want %q", got, Binary)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.licenses": License,
	} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if !cf.Created.Time.Equal(created) {
		t.Errorf("created = %s, want %s", cf.Created.Time, created)
	}

	files := extract(t, img, dir)
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox"} {
		if _, ok := files[shell]; ok {
			t.Errorf("image holds %s; it must have no shell", shell)
		}
	}
	if h, ok := files["home/nonroot"]; !ok || h.Typeflag != tar.TypeDir || h.Uid != NonRoot {
		t.Errorf("home/nonroot missing, not a directory or not owned by %d: %+v", NonRoot, h)
	}
	printed, err := exec.Command(filepath.Join(dir, "rootfs", Binary), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", Binary, err, printed)
	}
	if want := "vm-controller version " + version; strings.TrimSpace(string(printed)) != want {
		t.Errorf("%s --version printed %q, want %q", Binary, strings.TrimSpace(string(printed)), want)
	}

	// The OCI layout's index holds the same image for the platform.
	p, err := layout.FromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatalf("read OCI layout: %v", err)
	}
	root, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	rm, err := root.IndexManifest()
	if err != nil || len(rm.Manifests) != 1 {
		t.Fatalf("layout index: %v, %d entries, want 1", err, len(rm.Manifests))
	}
	idx, err := root.ImageIndex(rm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Fatalf("multi-platform index = %+v, want one linux/%s entry", im.Manifests, runtime.GOARCH)
	}
	// The docker tarball keeps the config and the layers, not the OCI manifest (docker load
	// writes its own), so the images are compared by their config.
	ociImg, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	got, want := configName(t, ociImg), configName(t, img)
	if got != want {
		t.Errorf("the OCI layout's image has config %s, the tarball's %s", got, want)
	}
}

func configName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatalf("config digest: %v", err)
	}
	return h
}

// extract writes the image's flattened filesystem under dir/rootfs (regular files only)
// and returns every entry's header by path.
func extract(t *testing.T, img v1.Image, dir string) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers
		}
		if err != nil {
			t.Fatalf("read layers: %v", err)
		}
		headers[path.Clean(h.Name)] = h
		if h.Typeflag != tar.TypeReg {
			continue
		}
		dst := filepath.Join(dir, "rootfs", filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatalf("extract %s: %v", h.Name, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTag: the cases of the main module's testdata/image-tags.txt that are a version alone
// (no revision, not modified), what `make image` passes as -version: Tag gives them the tag
// `vm-controller manifests` of the same build names.
func TestTag(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "testdata", "image-tags.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 {
			t.Fatalf("image-tags.txt: %q: want version revision modified tag", line)
		}
		if fields[1] != "-" || fields[2] != "false" {
			continue
		}
		version, want := fields[0], fields[3]
		if version == "-" {
			version = ""
		}
		if got := Tag(version); got != want {
			t.Errorf("Tag(%q) = %q, want %q", version, got, want)
		}
		if _, err := name.NewTag(Repository + ":" + Tag(version)); err != nil {
			t.Errorf("Tag(%q): %v", version, err)
		}
		cases++
	}
	if cases == 0 {
		t.Fatal("image-tags.txt holds no version alone")
	}
}
