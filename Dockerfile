# The Dockerfile equivalent of `make image`, for those who build with a container engine. From
# the checkout, this stamps the version the Makefile's VERSION would and tags the image as
# `make image` does, with the tag `vm-controller manifests` names by default
# (docs/deploying.md):
#
#   version=$(git describe --tags --always --abbrev=7)
#   tag=$({ git describe --tags --exact-match 2>/dev/null || git rev-parse HEAD | cut -c1-7; } | tr + _)
#   test -z "$(git status --porcelain)" || { version=$version-dirty; tag=$tag-dirty; }
#   docker build --build-arg VERSION=$version -t ghcr.io/cloudnative-czs/vm-controller:$tag .
#
# The tag is the release on a tagged commit ("+", which a tag does not allow, as "_"), else the
# commit's first 7 hex digits, not git describe's output (v1.2.3-4-ge4239af after a tag, and
# more than 7 digits where 7 would be ambiguous); -dirty when git status lists a change, as an
# untracked file does, which git describe --dirty does not see.
#
# Both give a static binary, stamped with VERSION, as /vm-controller on a distroless static
# base, running as uid 65532 (nonroot), with no shell and the same OCI labels. `make image`
# needs no engine and no base image (it writes the few files distroless/static provides
# itself); this file is not built by the project's tests, which run where no engine exists.

# The build stage runs on the builder's platform and cross-compiles for the target's.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=devel
WORKDIR /src
# Modules first, so a change of source does not fetch them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-X main.version=${VERSION}" -o /out/vm-controller .

FROM gcr.io/distroless/static:nonroot
ARG VERSION=devel
LABEL org.opencontainers.image.title="vm-controller" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/cloudnative-czs/vm-controller" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/vm-controller /vm-controller
USER 65532:65532
WORKDIR /home/nonroot
ENTRYPOINT ["/vm-controller"]
CMD ["run"]
