#!/usr/bin/env bash
# Builds containerd VERSION (default v2.4.2; v1.7.35 still builds) from the
# Go module proxy into /var/cache/hwnet-ci/containerd/VERSION/bin, once:
# Debian 12's containerd 1.6 reads no CDI specs, which the e2e cluster's DRA
# tests need, and calls no CNI STATUS or GC, which 2.x does. A 2.x build also
# has its own containerd-shim-runc-v2 beside it (the cluster's config names
# it). `go install` refuses containerd's go.mod (it has exclude directives),
# so the module is built as a main module from a copy of its source.
set -euo pipefail
version=${1:-v2.4.2}
cache=/var/cache/hwnet-ci/containerd
bin=$cache/$version/bin
module=github.com/containerd/containerd
cmds=(containerd)
if [[ $version == v2.* ]]; then
  module=$module/v2
  cmds+=(containerd-shim-runc-v2)
fi
done=true
for cmd in "${cmds[@]}"; do [[ -x $bin/$cmd ]] || done=false; done
if $done; then exit 0; fi
go=${GO:-go}
export GOFLAGS="-buildvcs=false -mod=mod"
src=$cache/src-$version
dir=$($go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
rm -rf "$src"
mkdir -p "$cache" "$bin"
cp -r "$dir" "$src"
chmod -R u+w "$src"
cd "$src"
for cmd in "${cmds[@]}"; do
  # The shim runs no snapshotter and needs no cgo; containerd keeps the
  # same build tags as 1.7's.
  $go build -tags "no_btrfs no_devmapper no_zfs no_aufs" \
    -ldflags "-X $module/version.Version=$version" -o "$bin/$cmd.tmp" "./cmd/$cmd"
  mv "$bin/$cmd.tmp" "$bin/$cmd"
done
