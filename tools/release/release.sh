#!/usr/bin/env bash
# release.sh is `make release`: static vm-controller binaries for linux and darwin, amd64 and
# arm64, stamped with $VERSION, each also as kubectl-vm (the kubectl plugin), and a sha256
# checksums file, under dist/. A small script
# rather than goreleaser, whose module graph alone costs longer to build than these four
# binaries. Upload dist/ as the release's assets; the image comes from `make image`.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
# Without make: the Makefile's VERSION, the same rule (an untracked file makes the tree dirty).
if [[ -z ${VERSION:-} ]]; then
	if VERSION=$(git describe --tags --always --abbrev=7 2>/dev/null); then
		[[ -z $(git status --porcelain 2>/dev/null) ]] || VERSION=$VERSION-dirty
	else
		VERSION=devel
	fi
fi
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
DIST=${DIST:-dist}

rm -rf "$DIST"
mkdir -p "$DIST"
for p in $PLATFORMS; do
	os=${p%/*} arch=${p#*/}
	out=$DIST/vm-controller-$VERSION-$os-$arch
	echo "go build $os/$arch -> $out"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-X main.version=$VERSION" -o "$out" .
	# The kubectl plugin is the same binary under its name (it looks at argv[0]): install it
	# on $PATH as kubectl-vm.
	cp "$out" "$DIST/kubectl-vm-$VERSION-$os-$arch"
done

# sha256sum on Linux, shasum on macOS; both write the format `sha256sum -c` checks.
cd "$DIST"
if command -v sha256sum >/dev/null 2>&1; then
	sha256sum vm-controller-* kubectl-vm-* >checksums.txt
else
	shasum -a 256 vm-controller-* kubectl-vm-* >checksums.txt
fi
echo "checksums: $DIST/checksums.txt (verify with: cd $DIST && sha256sum -c checksums.txt)"
ls -l
