#!/usr/bin/env bash
# Builds the Kubernetes control plane and node binaries hwnet's tests run
# (kube-apiserver, kubelet, kube-controller-manager, kube-scheduler, kubectl)
# plus etcd, from the Go module proxy, into a directory keyed by version.
#
#   build-kube.sh [VERSION] [OUTDIR]
#
# VERSION defaults to v1.37.1; OUTDIR to $HWNET_KUBE_CACHE or
# /var/cache/hwnet-ci/kube/VERSION/bin. A stamp file written last marks a
# finished build, so a second run does nothing.
#
# `go install k8s.io/kubernetes/cmd/...@VERSION` does not work: kubernetes'
# go.mod replaces its staging modules with ./staging paths. A wrapper module
# requires k8s.io/kubernetes and replaces every staging module with its
# published v0.X.Y twin instead.
set -euo pipefail

version=${1:-v1.37.1}
outdir=${2:-${HWNET_KUBE_CACHE:-/var/cache/hwnet-ci/kube/$version/bin}}
# etcd v3.6 is what kube-apiserver 1.37 is released with; its main package
# is the root of go.etcd.io/etcd/server/v3. Debian's etcd-server 3.4.23 runs
# kube-apiserver 1.37.1 too, but lacks RequestWatchProgress: client-go's
# informers then fall back from one streaming WATCH to LIST + WATCH, so
# request counts measured against it would not be a real cluster's.
etcd_version=${HWNET_ETCD_VERSION:-v3.6.16}
kube_cmds=(kube-apiserver kubelet kube-controller-manager kube-scheduler kubectl)

case "$version" in
  v1.*.*) ;;
  *) echo "build-kube: VERSION must look like v1.37.1, got '$version'" >&2; exit 2 ;;
esac
staging_version=v0.${version#v1.}
stamp="$outdir/.hwnet-build-stamp"
stamp_text="kubernetes $version etcd $etcd_version"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ]; then
  echo "build-kube: $stamp_text already in $outdir; nothing to do"
  exit 0
fi

export PATH="$PATH:/usr/local/go/bin"
# Build and module caches: the caller's if set, else our own beside the
# versioned directories so every version shares them.
cache_root=$(dirname "$(dirname "$outdir")")
export GOMODCACHE=${GOMODCACHE:-$cache_root/go-mod}
export GOCACHE=${GOCACHE:-$cache_root/go-build}
export GOPATH=${GOPATH:-$cache_root/gopath}
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
work="$cache_root/src"
mkdir -p "$outdir" "$GOMODCACHE" "$GOCACHE" "$GOPATH" "$work"
rm -f "$stamp"

log() { echo "build-kube: [$(date +%T)] $*"; }
# shellcheck source=progress.sh
. "$(dirname "${BASH_SOURCE[0]}")/progress.sh"

# wrapper_module DIR MODULE... makes DIR a fresh module requiring MODULE@VERSION
# pairs given as further arguments.
wrapper_module() {
  local dir=$1; shift
  rm -rf "$dir"
  mkdir -p "$dir"
  (cd "$dir" && go mod init "hwnet.local/$(basename "$dir")" >/dev/null 2>&1 &&
    go mod edit -go="$(go env GOVERSION | sed 's/^go//')" &&
    for req in "$@"; do go mod edit -require="$req"; done)
}

# staging_modules prints the module paths kubernetes' go.mod replaces with
# ./staging directories.
staging_modules() {
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  [ -f "$gomod" ] || { echo "build-kube: no go.mod for k8s.io/kubernetes@$version" >&2; return 1; }
  sed -n 's#^[[:space:]]*\(replace[[:space:]]\+\)\?\(k8s\.io/[^[:space:]]\+\)[[:space:]]*=>[[:space:]]*\./staging/.*#\2#p' "$gomod"
}

build_kube() {
  local dir="$work/kubernetes-$version" mod ldflags="" pkg
  log "resolving k8s.io/kubernetes@$version"
  wrapper_module "$dir" "k8s.io/kubernetes@$version"
  local staged
  staged=$(staging_modules)
  [ -n "$staged" ] || { echo "build-kube: found no staging modules in kubernetes' go.mod" >&2; return 1; }
  for mod in $staged; do
    (cd "$dir" && go mod edit -replace="$mod=$mod@$staging_version")
  done
  log "replaced $(echo "$staged" | wc -l) staging modules with $staging_version"
  {
    echo '//go:build tools'
    echo
    echo 'package tools'
    echo
    echo 'import ('
    for pkg in "${kube_cmds[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$pkg\""; done
    echo ')'
  } >"$dir/tools.go"
  log "go mod tidy (downloads about 1 GB of modules on a cold cache)"
  (cd "$dir" && go mod tidy)
  local minor=${version#v1.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  log "building ${kube_cmds[*]} (cold: about 20 CPU-minutes, 19-47 minutes measured on 2 loaded cores, up to 4 GB of memory)"
  # One binary at a time, each with a count of its packages still to
  # compile: the first (kube-apiserver) compiles most of what the others
  # share, so later ones go faster.
  local i=0 total
  for pkg in "${kube_cmds[@]}"; do
    i=$((i + 1))
    total=$(cd "$dir" && go list -trimpath -deps -f '{{if .Stale}}{{.ImportPath}}{{end}}' "k8s.io/kubernetes/cmd/$pkg" | grep -c . || true)
    log "[$i/${#kube_cmds[@]}] $pkg: $total packages to compile"
    (cd "$dir" && go build -v -trimpath -ldflags="-s -w$ldflags" -o "$outdir/" "k8s.io/kubernetes/cmd/$pkg" 2>&1) |
      build_progress "[$i/${#kube_cmds[@]}] $pkg" "$total"
    [ -x "$outdir/$pkg" ] || { echo "build-kube: $pkg was not built" >&2; return 1; }
  done
}

build_etcd() {
  local dir="$work/etcd-$etcd_version"
  log "building etcd $etcd_version"
  wrapper_module "$dir" "go.etcd.io/etcd/server/v3@$etcd_version"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$dir/tools.go"
  (cd "$dir" && go mod tidy && go build -trimpath -ldflags="-s -w" -o "$outdir/etcd" go.etcd.io/etcd/server/v3)
}

start=$(date +%s)
build_kube
build_etcd
"$outdir/kube-apiserver" --version
"$outdir/etcd" --version | head -1
echo "$stamp_text" >"$stamp"
log "done in $(( $(date +%s) - start ))s: $outdir"
