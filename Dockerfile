# The Dockerfile equivalent of `make image`, for those who build with a container engine:
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty --abbrev=7) \
#     -t ghcr.io/cloudnative-czs/vm-controller:<tag> .
#
# where <tag> is the tag `make image` gives the same commit, the one `vm-controller manifests`
# names (docs/deploying.md): for a commit without a tag, the version above.
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
