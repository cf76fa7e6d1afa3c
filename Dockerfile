# hwnet's image: hwnet-agent, the hwnet CNI shim (the agent installs it
# into the node's CNI bin directory and writes hwnet's CNI configuration
# itself, --cni-install-shim), hwnetctl and hwnet-controller, static, on a
# minimal base.
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t hwnet:dev .
#   podman build / buildah bud --build-arg VERSION=... -t hwnet:dev .
# `make image` writes the same files as a tarball without a daemon;
# `make image-buildah` runs buildah bud (docs/operations.md).
# The base images are build arguments for a mirror or a machine without a
# registry (test/buildah/bud-local.sh builds on local stand-ins); GOPROXY,
# GOSUMDB and GOFLAGS pass through to the go command when set. The module
# and build caches are cache mounts, kept between builds, so no separate
# `go mod download` layer: the build fetches what it compiles.
ARG BUILDER_IMAGE=docker.io/library/golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static-debian12

FROM ${BUILDER_IMAGE} AS build
WORKDIR /src
ARG GOPROXY=
ARG GOSUMDB=
ARG GOFLAGS=
COPY . .
ARG VERSION=unknown
# -tags grpcnotrace as make image builds (test/e2e/image's BuildTags): grpc
# without golang.org/x/net/trace, so the linker drops the code nothing calls.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -tags grpcnotrace \
      -ldflags "-X github.com/hwnet-io/hwnet/internal/version.stamped=${VERSION}" \
      -o /out/ ./cmd/hwnet-agent ./cmd/hwnet ./cmd/hwnetctl ./cmd/hwnet-controller

FROM ${BASE_IMAGE}
ARG VERSION=unknown
LABEL org.opencontainers.image.title=hwnet \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.source=https://github.com/hwnet-io/hwnet
COPY --from=build /out/ /usr/bin/
# The agent runs as root: netlink on the node's links, kubelet's device
# plugin and PodResources sockets, the CNI directories and /dev are root's.
USER 0:0
ENTRYPOINT ["/usr/bin/hwnet-agent"]
