#!/usr/bin/env bash
# Builds into DESTDIR the CNI plugin binaries hwnet's tests and demos use:
# the containernetworking reference plugins at cniplugins.Version, cnitool at
# the containernetworking/cni version in go.mod, and hwnet-test-plugin from
# this working tree. Binaries already built from the wanted module version
# are kept, so running it again builds nothing but hwnet-test-plugin.
# With HWNET_CNI_BIN_CACHE=DESTDIR, cniplugins.Dir uses what it built.
set -euo pipefail

dest=${1:?usage: install-cni-plugins.sh DESTDIR}
repo=$(cd "$(dirname "$0")/.." && pwd)
plugins_version=$(sed -n 's/^const Version = "\(v[^"]*\)".*/\1/p' "$repo/test/cniplugins/cniplugins.go")
cni_version=$(cd "$repo" && go list -m -f '{{.Version}}' github.com/containernetworking/cni)
plugins_module=github.com/containernetworking/plugins
cni_module=github.com/containernetworking/cni
plugins=(main/host-device main/macvlan main/bridge main/loopback ipam/static ipam/host-local
  meta/tuning meta/bandwidth meta/portmap)

mkdir -p "$dest"
tmp=$(mktemp -d "$dest/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# built_from BINARY MODULE VERSION: whether BINARY is a Go binary of MODULE@VERSION.
built_from() {
  [ -x "$1" ] && [ "$(go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $2 "@" $3; exit }')" = "$2@$3" ]
}

# install MODULE VERSION PACKAGE...: go install the packages that DESTDIR
# lacks or holds from another version, then move them in.
install() {
  local module=$1 version=$2 pkg todo=()
  shift 2
  for pkg in "$@"; do
    built_from "$dest/${pkg##*/}" "$module" "$version" || todo+=("$module/$pkg@$version")
  done
  [ ${#todo[@]} -gt 0 ] || return 0
  echo "install-cni-plugins: building ${todo[*]}"
  (cd "$tmp" && GOBIN="$tmp" GOWORK=off GOFLAGS= CGO_ENABLED=0 go install "${todo[@]}")
  for pkg in "${todo[@]}"; do
    pkg=${pkg%@*}
    mv -f "$tmp/${pkg##*/}" "$dest/${pkg##*/}"
  done
}

install "$plugins_module" "$plugins_version" "${plugins[@]/#/plugins/}"
install "$cni_module" "$cni_version" cnitool

echo "install-cni-plugins: building hwnet-test-plugin from $repo"
(cd "$repo" && CGO_ENABLED=0 go build -buildvcs=false -o "$tmp/hwnet-test-plugin" ./test/cniplugins/recorder)
mv -f "$tmp/hwnet-test-plugin" "$dest/hwnet-test-plugin"
echo "install-cni-plugins: $dest has hwnet-test-plugin, ${plugins[*]##*/} (plugins $plugins_version) and cnitool (cni $cni_version)"
