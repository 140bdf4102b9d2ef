// Command image builds vm-controller's container image without a container engine: it
// writes one layer holding the static binary (plus the files a distroless static base
// carries: a passwd entry for the non-root user, its home, /tmp and optionally CA
// certificates), on an empty base, so no base image has to be pulled from a registry.
//
// It writes, under -out:
//
//	vm-controller-<tag>-linux-<arch>.tar  one docker-compatible tarball per architecture
//	                                      (docker load, kind load image-archive, crane push)
//	oci/                                  an OCI image layout whose index holds every
//	                                      architecture (crane push --index, skopeo copy)
//
// The binaries are built beforehand (see the Makefile's image target), one per platform,
// as <bin-dir>/linux-<arch>/vm-controller.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Repository is where vm-controller's image is published; `vm-controller manifests`
// defaults its Deployment's image to this repository and the build's tag.
const Repository = "ghcr.io/cloudnative-czs/vm-controller"

// Source and License are stamped into the image's OCI labels.
const (
	Source  = "https://github.com/cloudnative-czs/vm-controller"
	License = "Apache-2.0"
)

// NonRoot is the uid and gid the controller runs as: distroless's "nonroot" user, so
// the image and gcr.io/distroless/static:nonroot (the Dockerfile's base) agree.
const NonRoot = 65532

// Binary is the entrypoint's path inside the image.
const Binary = "/vm-controller"

// Options say what to build.
type Options struct {
	Version   string    // stamped into the binary and the labels; the tag derives from it
	Binaries  []string  // one static linux binary per platform, by arch: "amd64=/path"
	CABundle  string    // a PEM bundle to ship as /etc/ssl/certs/ca-certificates.crt; empty: none
	Created   time.Time // the image's creation time and every file's mtime, for reproducible builds
	OutDir    string
	OCILayout bool // also write an OCI layout with a multi-platform index
}

var (
	// pseudoVersion is a Go pseudo-version (v0.0.0-20261124213112-e4239af6be4a, or after a
	// release v1.2.4-0.20261124213112-e4239af6be4a), +dirty for a modified tree; the group is
	// the commit's 12 hex digits.
	pseudoVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+-(?:[0-9A-Za-z.-]*\.)?[0-9]{14}-([0-9a-f]{12})(\+dirty)?$`)
	// describedVersion is what git describe --tags prints for a commit after a tag
	// (v1.2.3-4-ge4239af, -dirty for a modified tree); the group is the abbreviated commit.
	describedVersion = regexp.MustCompile(`^.+-[0-9]+-g([0-9a-f]{7,})(-dirty)?$`)
	// hashVersion is what git describe --always prints for a commit no tag precedes: the
	// abbreviated commit, 7 hex digits or more where 7 would be ambiguous (e4239af6), -dirty
	// for a modified tree; the group is the abbreviation. A release starts with v.
	hashVersion = regexp.MustCompile(`^([0-9a-f]{7,40})(-dirty)?$`)
)

// Tag is the image tag for a version, by the rule `vm-controller manifests` applies to its
// default image (imageTagOf, in the main module's command/, which this module cannot import):
// a release is its version (-dirty for Go's +dirty); any other commit, named by a Go
// pseudo-version or by git describe's abbreviation (alone or after a tag, 7 hex digits or
// more), is its first 7 hex digits (-dirty); devel is latest. Another "+" becomes "_", which a
// tag allows. TestTag checks it against the cases imageTagOf's test reads,
// testdata/image-tags.txt at the root.
func Tag(version string) string {
	if version == "" || version == "devel" || version == "(devel)" {
		return "latest"
	}
	if m := pseudoVersion.FindStringSubmatch(version); m != nil {
		if m[2] != "" {
			return m[1][:7] + "-dirty"
		}
		return m[1][:7]
	}
	if m := describedVersion.FindStringSubmatch(version); m != nil {
		return m[1][:7] + m[2]
	}
	if m := hashVersion.FindStringSubmatch(version); m != nil {
		return m[1][:7] + m[2]
	}
	dirty := ""
	if v, ok := strings.CutSuffix(version, "+dirty"); ok {
		version, dirty = v, "-dirty"
	}
	return strings.ReplaceAll(version, "+", "_") + dirty
}

// Build writes the tarballs (and the OCI layout) and returns the tarballs' paths.
func Build(o Options) ([]string, error) {
	ref, err := name.NewTag(Repository + ":" + Tag(o.Version))
	if err != nil {
		return nil, fmt.Errorf("parse image reference: %w", err)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	var tarballs []string
	var adds []mutate.IndexAddendum
	for _, b := range o.Binaries {
		arch, path, ok := strings.Cut(b, "=")
		if !ok {
			return nil, fmt.Errorf("parse binary %q: want arch=path", b)
		}
		img, err := Image(o, arch, path)
		if err != nil {
			return nil, fmt.Errorf("build image for %s: %w", arch, err)
		}
		out := filepath.Join(o.OutDir, fmt.Sprintf("vm-controller-%s-linux-%s.tar", Tag(o.Version), arch))
		if err := tarball.WriteToFile(out, ref, img); err != nil {
			return nil, fmt.Errorf("write tarball %s: %w", out, err)
		}
		tarballs = append(tarballs, out)
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	if o.OCILayout {
		idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
		idx = mutate.Annotations(idx, map[string]string{
			"org.opencontainers.image.ref.name": ref.String(),
			"org.opencontainers.image.version":  o.Version,
		}).(v1.ImageIndex)
		dir := filepath.Join(o.OutDir, "oci")
		// A layout is appended to, never rewritten: start afresh so it holds this build only.
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove old OCI layout: %w", err)
		}
		p, err := layout.Write(dir, empty.Index)
		if err != nil {
			return nil, fmt.Errorf("create OCI layout: %w", err)
		}
		if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref.String()})); err != nil {
			return nil, fmt.Errorf("write OCI layout: %w", err)
		}
	}
	return tarballs, nil
}

// Image is the single-platform image around one binary.
func Image(o Options, arch, binary string) (v1.Image, error) {
	layer, err := rootfs(o, binary)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: o.Created}
	cf.Author = "the vm-controller authors"
	cf.Config.User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Entrypoint = []string{Binary}
	cf.Config.Cmd = []string{"run"}
	cf.Config.Env = []string{"PATH=/", "HOME=/home/nonroot"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "vm-controller",
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.licenses": License,
		"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return mutate.CreatedAt(img, v1.Time{Time: o.Created})
}

// rootfs is the image's one layer: what gcr.io/distroless/static:nonroot provides that a
// static Go binary uses (passwd and group, a home, /tmp, CA certificates), plus the binary.
func rootfs(o Options, binary string) (v1.Layer, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: o.Created})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: o.Created}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error {
			return file("etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot))
		},
		func() error {
			return file("etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nnobody:x:65534:\nnonroot:x:%d:\n", NonRoot))
		},
		func() error { return dir("home", 0o755, 0) },
		func() error { return dir("home/nonroot", 0o700, NonRoot) },
		func() error { return dir("tmp", 0o1777, 0) },
	}
	if o.CABundle != "" {
		ca, err := os.ReadFile(o.CABundle)
		if err != nil {
			return nil, fmt.Errorf("read CA bundle: %w", err)
		}
		steps = append(steps,
			func() error { return dir("etc/ssl", 0o755, 0) },
			func() error { return dir("etc/ssl/certs", 0o755, 0) },
			func() error { return file("etc/ssl/certs/ca-certificates.crt", 0o644, ca) })
	}
	steps = append(steps, func() error { return file(strings.TrimPrefix(Binary, "/"), 0o755, bin) })
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, fmt.Errorf("write layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

type binaries []string

func (b *binaries) String() string     { return strings.Join(*b, ",") }
func (b *binaries) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	var o Options
	var bins binaries
	var epoch int64
	flag.StringVar(&o.Version, "version", "devel", "the version stamped into the binaries, which the tag derives from (Tag); devel: latest")
	flag.Var(&bins, "binary", "arch=path of a static linux binary; repeat per platform (amd64=bin/image/linux-amd64/vm-controller)")
	flag.StringVar(&o.CABundle, "ca-bundle", "", "PEM CA bundle to ship as /etc/ssl/certs/ca-certificates.crt; empty: none")
	flag.Int64Var(&epoch, "created", 0, "creation time in Unix seconds (SOURCE_DATE_EPOCH); 0: the Unix epoch, for reproducible images")
	flag.StringVar(&o.OutDir, "out", "bin/image", "output directory")
	flag.BoolVar(&o.OCILayout, "oci", true, "also write an OCI layout with a multi-platform index under <out>/oci")
	flag.Parse()
	o.Binaries = bins
	o.Created = time.Unix(epoch, 0).UTC()
	if len(o.Binaries) == 0 {
		fmt.Fprintln(os.Stderr, "image: at least one -binary arch=path is required")
		os.Exit(2)
	}
	out, err := Build(o)
	if err != nil {
		slog.Error("Image build failed", "err", err)
		os.Exit(1)
	}
	for _, p := range out {
		fi, err := os.Stat(p)
		if err != nil {
			slog.Error("Image missing after build", "path", p, "err", err)
			os.Exit(1)
		}
		slog.Info("Image written", "image", Repository+":"+Tag(o.Version), "tarball", p, "bytes", fi.Size())
	}
}
