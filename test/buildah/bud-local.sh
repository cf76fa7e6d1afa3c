#!/usr/bin/env bash
# buildah bud "$@" of hwnet's Dockerfile on a machine that reaches no
# container registry, e.g.
#   bash test/buildah/bud-local.sh --build-arg VERSION=$(git describe) -t hwnet:dev .
# The base images are local stand-ins this script commits into Buildah's
# storage first:
#   localhost/hwnet-standin/golang:<go version>  BUILDER_IMAGE: this
#     machine's Go toolchain at /usr/local/go, GOPATH=/go and a static shell
#     (Debian's busybox-static), laid out and configured as
#     docker.io/library/golang is;
#   localhost/hwnet-standin/static:debian12     BASE_IMAGE: what
#     gcr.io/distroless/static-debian12 holds (root, nobody and nonroot
#     accounts, CA certificates, tzdata, /tmp), and nothing to run.
# A stand-in whose inputs (this script, the toolchain, busybox, the host's
# certificates) are unchanged is kept. The go command in the build fetches
# modules from the host's module cache (GOPROXY=file://, a read-only bind
# mount) and the build has no network.
# Buildah is $BUILDAH (default: buildah on PATH), with the global options
# (--root, --runroot, --storage-driver) in $BUILDAH_OPTS.
set -euo pipefail

buildah() { command "${BUILDAH:-buildah}" ${BUILDAH_OPTS:-} "$@"; }

goroot=$(go env GOROOT)
goversion=$(go env GOVERSION | sed 's/^go//')
busybox=$(command -v busybox) || { echo "bud-local: no busybox (apt-get install busybox-static)" >&2; exit 1; }
if ldd "$busybox" >/dev/null 2>&1; then
  echo "bud-local: $busybox is dynamically linked; install busybox-static" >&2
  exit 1
fi
certs=/etc/ssl/certs/ca-certificates.crt
builder=localhost/hwnet-standin/golang:$goversion
base=localhost/hwnet-standin/static:debian12

inputs() {
  { sha256sum "$0" "$busybox" "$certs"; go env GOVERSION; } | sha256sum | cut -d' ' -f1
}
label=io.hwnet.standin.inputs
want=$(inputs)

current() { # image: whether it exists with today's inputs
  [ "$(buildah inspect --type image --format "{{index .ImageAnnotations \"$label\"}}" "$1" 2>/dev/null)" = "$want" ]
}

# stage writes the small files both images share into $1.
stage() {
  local root=$1
  mkdir -p "$root"/etc/ssl/certs "$root"/tmp "$root"/root "$root"/home/nonroot
  chmod 1777 "$root"/tmp
  chmod 700 "$root"/root "$root"/home/nonroot
  cp "$certs" "$root"/etc/ssl/certs/ca-certificates.crt
  cat >"$root"/etc/passwd <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
  cat >"$root"/etc/group <<'EOF'
root:x:0:
tty:x:5:
staff:x:50:
nobody:x:65534:
nonroot:x:65532:
EOF
  echo 'hosts: files dns' >"$root"/etc/nsswitch.conf
}

commit() { # container image
  buildah rmi "$2" >/dev/null 2>&1 || true # the stand-in it replaces, whose inputs changed
  buildah config --annotation "$label=$want" "$1" >/dev/null
  buildah commit --quiet --rm "$1" "$2" >/dev/null
}

build_base() {
  local c root
  c=$(buildah from scratch)
  root=$(buildah mount "$c")
  stage "$root"
  chown 65532:65532 "$root"/home/nonroot
  mkdir -p "$root"/usr/share
  cp -a /usr/share/zoneinfo "$root"/usr/share/zoneinfo
  buildah umount "$c" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt --user 0 --workingdir / \
    --os linux --arch "$(go env GOARCH)" "$c"
  commit "$c" "$base"
}

build_builder() {
  local c root applet
  c=$(buildah from scratch)
  root=$(buildah mount "$c")
  stage "$root"
  mkdir -p "$root"/bin "$root"/go/bin "$root"/go/src "$root"/go/pkg "$root"/usr/local
  chmod -R 1777 "$root"/go
  cp "$busybox" "$root"/bin/busybox
  for applet in $("$busybox" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
  done
  cp -a "$goroot" "$root"/usr/local/go
  buildah umount "$c" >/dev/null
  buildah config --env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env GOLANG_VERSION="$goversion" --env GOTOOLCHAIN=local --env GOPATH=/go \
    --workingdir /go --cmd /bin/sh --os linux --arch "$(go env GOARCH)" "$c"
  commit "$c" "$builder"
}

current "$base" || build_base
current "$builder" || build_builder
buildah bud --pull=never --network=none \
  --build-arg BUILDER_IMAGE="$builder" --build-arg BASE_IMAGE="$base" \
  --build-arg GOPROXY=file:///goproxy -v "$(go env GOMODCACHE)/cache/download:/goproxy:ro" "$@"
