#!/usr/bin/env bash
# Whole-process benchmark of hwnet beside its peers (make bench-peers):
# hwnet-agent and the SR-IOV network device plugin (sriovdp) as kubelet
# sees them, and the hwnet CNI shim with its agent beside Multus v4.3.0
# thin and thick as a container runtime executes them, all on the same
# virtual SR-IOV node, in interleaved rounds. Prints one table of
# min / median / max and the peers' ratios to hwnet. See test/bench/README.md.
#
# Needs root (virtual node, netns, mounts) and kube-apiserver + etcd from
# `make kube-bins`. Peers are never committed: Multus is built through the
# Go module proxy in a throwaway wrapper module under PEERS_CACHE.
#
# Environment (all optional):
#   SRIOVDP_BIN=/path/to/sriovdp  default: the first of ../shared/peers/sriovdp
#                                 (beside the checkout) and /work/shared/peers/sriovdp
#   MULTUS_VERSION=v4.3.0  MULTUS=0 skips Multus; SRIOVDP_BIN=none skips sriovdp
#   PEERS_CACHE=/var/cache/hwnet-ci/peers  peer and hwnet builds
#   BENCH_ARGS="-rounds 5 -pods 20 ..."  passed to BenchmarkPeers (see -h of
#                                        go test ./test/bench/peers -args -h)
# A peer that is absent is reported so, and hwnet is measured alone.
set -euo pipefail

SELF=$(readlink -f "$0")
REPO=$(cd "$(dirname "$SELF")/../.." && pwd)
CACHE=${PEERS_CACHE:-/var/cache/hwnet-ci/peers}
MULTUS_VERSION=${MULTUS_VERSION:-v4.3.0}
MULTUS=${MULTUS:-1}
BENCH_ARGS=${BENCH_ARGS:-}

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'bench-peers: %s\n' "$1" >&2; exit "${2:-1}"; }

case "${1:-}" in
-h | --help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$SELF"; exit 0 ;;
"") ;;
*) die "unknown argument $1 (see --help)" 2 ;;
esac
[[ $EUID -eq 0 ]] || die "needs root: the virtual node has a network namespace, veth links and mounts" 2
command -v go >/dev/null || die "go is not on PATH" 2
mkdir -p "$CACHE"

# sriovdp reads PCI names through ghw, which needs a pci.ids.
bash "$REPO/test/bench/pci-ids.sh" || die "pci.ids: see above" 2

# hwnet is built by the benchmark itself as the image ships it
# (test/e2e/image: -trimpath, static, its BuildTags), into the run's own
# temporary directory.

SRIOVDP=${SRIOVDP_BIN:-}
if [[ -z $SRIOVDP ]]; then
	for c in "$REPO/../shared/peers/sriovdp" /work/shared/peers/sriovdp; do
		[[ -x $c ]] && SRIOVDP=$(readlink -f "$c") && break
	done
fi
[[ $SRIOVDP == none ]] && SRIOVDP=""
if [[ -n $SRIOVDP && ! -x $SRIOVDP ]]; then
	die "SRIOVDP_BIN=$SRIOVDP is not an executable" 2
fi
[[ -n $SRIOVDP ]] && log "sriovdp: $SRIOVDP" || log "sriovdp: absent"

# Multus through the module proxy: `go install ...@v4.3.0` fails on a
# deprecation look-up, a wrapper module builds.
MULTUS_DIR=""
if [[ $MULTUS == 1 ]]; then
	mdir=$CACHE/multus-$MULTUS_VERSION
	if [[ ! -x $mdir/multus || ! -x $mdir/multus-shim || ! -x $mdir/multus-daemon ]]; then
		log "building Multus $MULTUS_VERSION from the Go module proxy into $mdir"
		mkdir -p "$mdir/src"
		if (cd "$mdir/src" && export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 &&
			{ [[ -f go.mod ]] || go mod init wrap; } &&
			go get "gopkg.in/k8snetworkplumbingwg/multus-cni.v4@$MULTUS_VERSION" &&
			for c in multus multus-shim multus-daemon; do
				go build -o "../$c" "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/$c" || exit 1
			done) >"$mdir/build.log" 2>&1; then
			MULTUS_DIR=$mdir
		else
			log "WARNING: Multus did not build (see $mdir/build.log); going on without it"
		fi
	else
		MULTUS_DIR=$mdir
	fi
fi
[[ -n $MULTUS_DIR ]] && log "multus: $MULTUS_DIR" || log "multus: absent"

OUT=$CACHE/results-$(date -u +%Y%m%d-%H%M%S).txt
log "running BenchmarkPeers (minutes; the table is also saved to $OUT)"
# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
(cd "$REPO" && go test -run '^$' -bench '^BenchmarkPeers$' -benchtime 1x -timeout 3h ./test/bench/peers \
	-args -sriovdp "$SRIOVDP" -multus "$MULTUS_DIR" $BENCH_ARGS) | tee "$OUT"
grep -q '^ok' "$OUT" || die "BenchmarkPeers failed; output in $OUT"
