# hwnet's image: hwnet-agent, the hwnet CNI shim (the agent installs it
# into the node's CNI bin directory and writes hwnet's CNI configuration
# itself, --cni-install-shim) and hwnetctl, static, on a minimal base.
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t hwnet:dev .
#   buildah bud --build-arg VERSION=... -t hwnet:dev .
# `make image` writes the same files as a tarball without a daemon.
ARG GO_VERSION=1.26
FROM docker.io/library/golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X github.com/hwnet-io/hwnet/version.stamped=${VERSION}" \
      -o /out/ ./cmd/hwnet-agent ./cmd/hwnet ./cmd/hwnetctl ./cmd/hwnet-controller

# The agent runs as root: netlink on the node's links, kubelet's device
# plugin and PodResources sockets, the CNI directories and /dev are root's.
FROM gcr.io/distroless/static-debian12
COPY --from=build /out/ /usr/bin/
ENTRYPOINT ["/usr/bin/hwnet-agent"]
