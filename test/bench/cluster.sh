#!/usr/bin/env bash
# make bench-cluster: pod start on the real e2e cluster with hwnet (device
# plugin and DRA pools) and the peer stack (Multus thick v4.3.0 + sriovdp),
# interleaved rounds, one table (test/bench/README.md). Root.
#
#   BENCH_ARGS="-rounds 3 -pods 1,20,100"   flags of BenchmarkCluster
#   NODES=3                                  a control plane and 2 SR-IOV workers (-nodes)
#   SRIOVDP_BIN=/path/to/sriovdp           default: ../shared/peers/sriovdp, /work/shared/peers/sriovdp
#   PEERS_CACHE=/var/cache/hwnet-ci/peers  where Multus is built (shared with peers.sh)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${PEERS_CACHE:-/var/cache/hwnet-ci/peers}
MULTUS_VERSION=v4.3.0
mdir=$CACHE/multus-$MULTUS_VERSION
log() { printf 'bench-cluster: %s\n' "$*" >&2; }

# The peer's image gets the host's pci.ids, which sriovdp needs.
bash "$REPO/test/bench/pci-ids.sh"

# Multus's thick image holds the daemon, the shim, install_multus (its init
# container) and passthru; `go install ...@v4.3.0` fails on a deprecation
# look-up, a wrapper module builds.
for c in multus-daemon multus-shim install_multus passthru-cni; do
	out=$mdir/${c%-cni}
	[[ -x $out ]] && continue
	log "building Multus $MULTUS_VERSION cmd/$c into $mdir"
	mkdir -p "$mdir/src"
	(cd "$mdir/src" && export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 &&
		{ [[ -f go.mod ]] || go mod init wrap; } &&
		go get "gopkg.in/k8snetworkplumbingwg/multus-cni.v4@$MULTUS_VERSION" &&
		go build -o "$out" "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/$c") >>"$mdir/build.log" 2>&1 ||
		{ log "Multus did not build: see $mdir/build.log"; exit 1; }
done

OUT=$CACHE/cluster-results-$(date -u +%Y%m%d-%H%M%S).txt
log "waiting for the e2e lock /tmp/hwnet-e2e.lock (the e2e suite must not share the CPUs)"
cd "$REPO"
# shellcheck disable=SC2086
flock /tmp/hwnet-e2e.lock go test -run '^$' -bench '^BenchmarkCluster$' -benchtime 1x -timeout 60m \
	./test/bench/cluster -args -multus "$mdir" -nodes "${NODES:-1}" ${BENCH_ARGS:-} | tee "$OUT"
log "table saved to $OUT"
