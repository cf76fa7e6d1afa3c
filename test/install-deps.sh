#!/usr/bin/env bash
# Installs what hwnet's build and tests need on a fresh Debian machine of
# this project's kind, and nothing when it is already there.
set -euo pipefail

need=()
command -v ip >/dev/null || need+=(iproute2)
command -v gcc >/dev/null || need+=(gcc)   # go test -race needs cgo
command -v git >/dev/null || need+=(git)
command -v make >/dev/null || need+=(make)
# buildah bud of the Dockerfile (test/e2e/image's TestDockerfileBuildah):
# buildah, runc for its RUN steps, and a static shell for the stand-in of
# the golang builder image (test/buildah/bud-local.sh).
command -v buildah >/dev/null || need+=(buildah)
command -v runc >/dev/null || need+=(runc)
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || need+=(busybox-static)
# The e2e cluster's runtime (test/e2e/cluster's ensureRuntime would install
# it too, but the e2e packages' test binaries run at once and would contend
# for dpkg's lock).
command -v containerd >/dev/null || need+=(containerd)
# The multi-arch image's arm64 binaries run under user-mode emulation
# (test/e2e/image's TestReleaseIndexRunsOnArm64), called by name: no binfmt.
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing ${need[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "install-deps: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! command -v go >/dev/null; then
  echo "install-deps: no go on PATH (expected /usr/local/go/bin)" >&2
  exit 1
fi
want=1.26
have=$(go env GOVERSION | sed 's/^go//')
case "$have" in
  "$want"|"$want".*) ;;
  *) echo "install-deps: go $have found, go $want needed" >&2; exit 1 ;;
esac

# inotify instances are counted per user, root's included: each e2e node's
# kubelet and containerd, each agent, virtual node and API server of the
# tests running at once holds some, and Linux's default of 128 ran out
# under `make test` with soaks beside it (inotify_init1: EMFILE, "too many
# open files", in two packages at once). Kubernetes nodes and kind raise it
# the same way.
if [ "$(id -u)" = 0 ] && [ "$(cat /proc/sys/fs/inotify/max_user_instances)" -lt 1024 ]; then
  echo "install-deps: fs.inotify.max_user_instances $(cat /proc/sys/fs/inotify/max_user_instances) -> 1024"
  sysctl -qw fs.inotify.max_user_instances=1024
fi
