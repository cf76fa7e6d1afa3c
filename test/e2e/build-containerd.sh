#!/usr/bin/env bash
# Builds containerd VERSION from the Go module proxy into
# /var/cache/hwnet-ci/containerd/VERSION/bin, once: Debian 12's containerd
# 1.6 reads no CDI specs, which the e2e cluster's DRA tests need. `go
# install` refuses containerd's go.mod (it has exclude directives), so
# the module is built as a main module from a copy of its source.
set -euo pipefail
version=${1:-v1.7.35}
cache=/var/cache/hwnet-ci/containerd
out=$cache/$version/bin/containerd
if [[ -x $out ]]; then exit 0; fi
go=${GO:-go}
export GOFLAGS="-buildvcs=false -mod=mod"
src=$cache/src-$version
dir=$($go mod download -json "github.com/containerd/containerd@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
rm -rf "$src"
mkdir -p "$cache" "$(dirname "$out")"
cp -r "$dir" "$src"
chmod -R u+w "$src"
cd "$src"
$go build -tags "no_btrfs no_devmapper no_zfs no_aufs" \
  -ldflags "-X github.com/containerd/containerd/version.Version=$version" -o "$out.tmp" ./cmd/containerd
mv "$out.tmp" "$out"
