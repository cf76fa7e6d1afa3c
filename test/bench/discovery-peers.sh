#!/usr/bin/env bash
# Side-by-side discovery benchmark: hwnet (`hwnetctl inventory`) against the
# SR-IOV network device plugin (`sriovdp`), both run as unmodified processes
# inside the SAME virtual SR-IOV node (hwnetctl virtual-node), one node per
# size, in one run. See test/bench/README.md.
#
# Needs root (the node has a netns and veth links). Nothing is built inside
# the hwnet module except hwnetctl itself: the peer is built in a throwaway
# module under the cache directory and never committed.
#
# Environment (all optional but BUILDTAGS, which make bench-discovery sets):
#   BUILDTAGS=grpcnotrace  the shipped binaries' build tags (the Makefile's)
#   SIZES="128 512 1024 2048"  VFs per PF; one PF (E810-C) per node
#   HWNET_RUNS=11  PEER_RUNS=3  timed runs per size; the median is reported
#   BENCH_CACHE=/var/cache/hwnet-bench  binaries, nodes, logs
#   SRIOVDP_BIN=/path/to/sriovdp  use this binary instead of building one
#   SRIOVDP_VERSIONS="v3.9.0 ..."  tags tried, in order, on the Go module proxy
#   PEER_TIMEOUT=120  seconds one sriovdp run may take to finish discovery
#   ALLOW_MISSING_PEER=1  if sriovdp cannot be had, still measure hwnet (and
#                         the ghw scan) and print n/a for sriovdp; without it
#                         the script stops with exit code 3
#   GHW_SCAN=1  also time a bare ghw.PCI() scan (the library call sriovdp's
#               discovery starts with); GHW_VERSION=v0.26.0
#
# Exit codes: 0 ok; 1 a tool failed or found the wrong number of VFs;
# 2 usage/environment; 3 sriovdp unavailable (see ALLOW_MISSING_PEER).
set -euo pipefail

SELF=$(readlink -f "$0")
REPO=$(cd "$(dirname "$SELF")/../.." && pwd)
: "${BUILDTAGS?is the build tags of the shipped binaries: run make bench-discovery, or set it as the Makefile does}"

# The functions a node of each size has: one E810-C PF and its iavf VFs.
MODEL=E810-C
VENDOR=8086
VF_DEVICE=1889
VF_DRIVER=iavf
# sriovdp's log lines (cmd/sriovdp/main.go): discovery is over at the first,
# devices are selected into pools (and counted) before the second.
PEER_DISCOVERED='Initializing resource servers'
PEER_READY='Starting all servers'

log() { printf '==> %s\n' "$*" >&2; }
die() {
	local code=${2:-1}
	printf 'discovery-peers: %s\n' "$1" >&2
	exit "$code"
}

# settle: wait (up to 30 s) until the CPUs are at least 90% idle over half a
# second. Building and destroying a node with thousands of veth links leaves
# the kernel busy in the background for a while (netns cleanup, RCU), which
# would otherwise land in the timings.
settle() {
	local i a b
	for ((i = 0; i < 60; i++)); do
		a=($(awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8+$9, $5+$6}' /proc/stat))
		sleep 0.5
		b=($(awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8+$9, $5+$6}' /proc/stat))
		if (((b[1] - a[1]) * 10 >= (b[0] - a[0]) * 9)); then
			return 0
		fi
	done
	log "WARNING: the machine did not go idle within 30 s; timings may be noisy"
}

median() { sort -n | awk '{v[NR]=$1} END{if (NR==0) exit 1; print v[int((NR+1)/2)]}'; }
us2ms() { awk -v u="$1" 'BEGIN{printf "%.1f", u/1000}'; }

# glog_ns LOG TEXT: the time, in ns since the epoch, of the first glog line of
# LOG containing TEXT ("I1121 10:23:45.123456 ...", local time).
glog_ns() {
	local line
	line=$(grep -m1 -F -- "$2" "$1") || return 1
	[[ $line =~ ^[IWEF]([0-9]{2})([0-9]{2})\ ([0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}) ]] || return 1
	date -d "$(date +%Y)-${BASH_REMATCH[1]}-${BASH_REMATCH[2]} ${BASH_REMATCH[3]}" +%s%N
}

# ---------------------------------------------------------------------------
# Run inside the node (via `hwnetctl virtual-node exec -- bash $SELF __...`).
# Each prints "n <devices found>" once and "t <microseconds>" per timed run.

in_node_hwnet() {
	local hwnetctl=$1 runs=$2 scratch=$3
	# Untimed run: checks what hwnet finds, and warms the dentry cache for
	# every tool that runs after it.
	"$hwnetctl" inventory -o json >"$scratch/hwnet.json"
	echo "n $(grep -c '"pf": "' "$scratch/hwnet.json" || true)"
	local i s e
	for ((i = 0; i < runs; i++)); do
		s=$(date +%s%N)
		"$hwnetctl" inventory -o json >/dev/null
		e=$(date +%s%N)
		echo "t $(((e - s) / 1000))"
	done
}

in_node_ghw() {
	local probe=$1 runs=$2 i s e n
	for ((i = 0; i < runs; i++)); do
		s=$(date +%s%N)
		n=$("$probe" "$VENDOR" "$VF_DEVICE")
		e=$(date +%s%N)
		echo "n $n"
		echo "t $(((e - s) / 1000))"
	done
}

in_node_sriovdp() {
	local bin=$1 cfg=$2 runs=$3 logdir=$4 timeout=$5
	# sriovdp would create its sockets under /var/lib/kubelet: give it an
	# empty /var/lib of its own (this mount namespace is the node's, private
	# to this process tree). With no kubelet there, registration fails after
	# discovery, which is all we time.
	mount -t tmpfs -o size=16m,mode=0755 hwnet-bench-varlib /var/lib
	mkdir -p /var/lib/kubelet/device-plugins
	local i start polled end disc pid deadline lg count
	for ((i = 1; i <= runs; i++)); do
		lg=$logdir/sriovdp-run$i.log
		start=$(date +%s%N)
		# In a session of its own, so that the kill below reaches anything
		# it may have started.
		setsid "$bin" --config-file="$cfg" --resource-prefix=hwnet.bench -logtostderr -v=10 >"$lg" 2>&1 &
		pid=$!
		deadline=$((SECONDS + timeout))
		until grep -q -F -- "$PEER_READY" "$lg"; do
			kill -0 "$pid" 2>/dev/null || break
			((SECONDS < deadline)) || break
			sleep 0.02
		done
		polled=$(date +%s%N)
		kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		if ! grep -q -F -- "$PEER_READY" "$lg"; then
			echo "e run $i: no '$PEER_READY' line within ${timeout}s (or sriovdp exited); log: $lg"
			return 0
		fi
		# Prefer sriovdp's own timestamp; fall back to when polling saw it.
		end=$(glog_ns "$lg" "$PEER_READY") || end=$polled
		((end >= start && end <= polled + 1000000000)) || end=$polled
		disc=$(glog_ns "$lg" "$PEER_DISCOVERED") || disc=0
		count=$(sed -n 's/.*will register \([0-9][0-9]*\) devices.*/\1/p' "$lg" | awk '{s += $1} END {print s + 0}')
		if ! grep -q 'will register [0-9]* devices' "$lg"; then
			count="?"
		fi
		echo "n $count"
		echo "t $(((end - start) / 1000))"
		if ((disc > start)); then
			echo "d $(((disc - start) / 1000))"
		fi
	done
}

case "${1:-}" in
__hwnet) shift; in_node_hwnet "$@"; exit ;;
__ghw) shift; in_node_ghw "$@"; exit ;;
__sriovdp) shift; in_node_sriovdp "$@"; exit ;;
"") ;;
-h | --help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$SELF"; exit 0 ;;
*) die "unknown argument $1 (see --help)" 2 ;;
esac

# ---------------------------------------------------------------------------
# The benchmark.

CACHE=${BENCH_CACHE:-/var/cache/hwnet-bench}
SIZES=${SIZES:-"128 512 1024 2048"}
HWNET_RUNS=${HWNET_RUNS:-11}
PEER_RUNS=${PEER_RUNS:-3}
PEER_TIMEOUT=${PEER_TIMEOUT:-120}
SRIOVDP_BIN=${SRIOVDP_BIN:-}
SRIOVDP_VERSIONS=${SRIOVDP_VERSIONS:-"v3.9.0 v3.8.0 v3.7.0 v3.6.2 v3.6.1 v3.5.1"}
SRIOVDP_MODULE=github.com/k8snetworkplumbingwg/sriov-network-device-plugin
ALLOW_MISSING_PEER=${ALLOW_MISSING_PEER:-0}
GHW_SCAN=${GHW_SCAN:-1}
GHW_VERSION=${GHW_VERSION:-v0.26.0}

[[ $EUID -eq 0 ]] || die "needs root: the virtual node has a network namespace and veth links" 2
command -v go >/dev/null || die "go is not on PATH" 2
for n in $SIZES; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || die "SIZES: '$n' is not a positive number" 2
done

T0=$SECONDS
mkdir -p "$CACHE"
RUN=$CACHE/run-$(date +%Y%m%d-%H%M%S)
mkdir -p "$RUN"
HWNETCTL=$CACHE/hwnetctl
# Go builds of the helpers happen outside hwnet's module and workspace.
export GOWORK=off GOTOOLCHAIN=local
export GHW_DISABLE_WARNINGS=1

CURRENT_NODE=""
cleanup() {
	local rc=$?
	if [[ -n $CURRENT_NODE && -f $CURRENT_NODE/state.json ]]; then
		log "destroying virtual node $CURRENT_NODE"
		"$HWNETCTL" virtual-node destroy --dir "$CURRENT_NODE" >/dev/null || log "destroy failed: clean up $CURRENT_NODE by hand"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. hwnetctl, from this tree. Other work may be mid-edit: retry a few times.
log "building hwnetctl"
for attempt in 1 2 3 4; do
	if (cd "$REPO" && go build -trimpath -tags "$BUILDTAGS" -o "$HWNETCTL" ./cmd/hwnetctl) 2>"$RUN/hwnetctl-build.log"; then
		break
	fi
	((attempt < 4)) || die "go build ./cmd/hwnetctl failed; see $RUN/hwnetctl-build.log"
	log "go build ./cmd/hwnetctl failed (attempt $attempt); retrying in 60s: $(head -n 3 "$RUN/hwnetctl-build.log")"
	sleep 60
done

# 2. sriovdp, at a pinned tag, in a throwaway module; cached by version.
build_sriovdp() {
	local v=$1 dir=$CACHE/sriovdp/$1 ref resolved
	rm -rf "$dir/src"
	mkdir -p "$dir/src"
	printf 'module hwnet.bench/sriovdp\n\ngo 1.22\n' >"$dir/src/go.mod"
	: >"$dir/build.log"
	# The repository has go.mod without a /v3 suffix, so its v3 tags may
	# only resolve as +incompatible, if at all.
	for ref in "$v" "$v+incompatible"; do
		echo "+ go get $SRIOVDP_MODULE@$ref" >>"$dir/build.log"
		if (cd "$dir/src" && GOFLAGS="-mod=mod -buildvcs=false" go get "$SRIOVDP_MODULE@$ref") >>"$dir/build.log" 2>&1 &&
			(cd "$dir/src" && GOFLAGS="-mod=mod -buildvcs=false" go build -o "$dir/sriovdp.tmp" "$SRIOVDP_MODULE/cmd/sriovdp") >>"$dir/build.log" 2>&1; then
			resolved=$(cd "$dir/src" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' "$SRIOVDP_MODULE" 2>/dev/null || echo "$ref")
			echo "$resolved" >"$dir/version"
			mv "$dir/sriovdp.tmp" "$dir/sriovdp"
			return 0
		fi
	done
	return 1
}

SRIOVDP=""
SRIOVDP_VERSION=""
if [[ -n $SRIOVDP_BIN ]]; then
	[[ -x $SRIOVDP_BIN ]] || die "SRIOVDP_BIN=$SRIOVDP_BIN is not an executable" 2
	SRIOVDP=$SRIOVDP_BIN
	SRIOVDP_VERSION="given binary $SRIOVDP_BIN"
else
	for v in $SRIOVDP_VERSIONS; do
		if [[ -x $CACHE/sriovdp/$v/sriovdp ]]; then
			log "sriovdp $v: cached"
		else
			log "sriovdp $v: building from the Go module proxy"
			if ! build_sriovdp "$v"; then
				log "sriovdp $v: not available: $(grep -v '^+' "$CACHE/sriovdp/$v/build.log" | tail -n 2 | sed 's/^.*: reading [^ ]*: //' | tr -s '\n\t' '  ')"
				continue
			fi
		fi
		SRIOVDP=$CACHE/sriovdp/$v/sriovdp
		SRIOVDP_VERSION="$v ($(cat "$CACHE/sriovdp/$v/version" 2>/dev/null || echo "$v"))"
		break
	done
fi
if [[ -z $SRIOVDP ]]; then
	msg="sriovdp could not be built from the Go module proxy at any of: $SRIOVDP_VERSIONS (logs: $CACHE/sriovdp/*/build.log). Give a binary with SRIOVDP_BIN=..., or set ALLOW_MISSING_PEER=1 to measure hwnet alone."
	[[ $ALLOW_MISSING_PEER == 1 ]] || die "$msg" 3
	log "WARNING: $msg Going on without it."
	SRIOVDP_VERSION="unavailable"
fi

# ghw needs a pci.ids to name devices; sriovdp's selectors do not, but its
# discovery reads it.
if [[ -n $SRIOVDP || $GHW_SCAN == 1 ]]; then
	if [[ -z ${PCIDB_PATH:-} ]]; then
		for f in /usr/share/misc/pci.ids /usr/share/hwdata/pci.ids; do
			[[ -f $f ]] && PCIDB_PATH=$f && break
		done
	fi
	if [[ -z ${PCIDB_PATH:-} ]]; then
		log "installing pci.ids"
		apt-get install -y pci.ids >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y pci.ids >/dev/null; } ||
			die "no pci.ids and apt-get install pci.ids failed" 2
		PCIDB_PATH=/usr/share/misc/pci.ids
	fi
	export PCIDB_PATH
fi

# Optional: a bare ghw.PCI() scan, as a third column.
GHW_PROBE=""
if [[ $GHW_SCAN == 1 ]]; then
	gdir=$CACHE/ghw-scan/$GHW_VERSION
	if [[ ! -x $gdir/ghw-scan ]]; then
		log "building the ghw $GHW_VERSION scan probe"
		mkdir -p "$gdir/src"
		printf 'module hwnet.bench/ghwscan\n\ngo 1.22\n' >"$gdir/src/go.mod"
		cat >"$gdir/src/main.go" <<'EOF'
// ghw-scan VENDOR DEVICE: ghw.PCI() over /sys, then prints how many
// functions have that vendor and device ID.
package main

import (
	"fmt"
	"os"

	"github.com/jaypipes/ghw"
)

func main() {
	info, err := ghw.PCI()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ghw-scan:", err)
		os.Exit(1)
	}
	n := 0
	for _, d := range info.Devices {
		if d.Vendor != nil && d.Product != nil && d.Vendor.ID == os.Args[1] && d.Product.ID == os.Args[2] {
			n++
		}
	}
	fmt.Println(n)
}
EOF
		if (cd "$gdir/src" && GOFLAGS="-mod=mod -buildvcs=false" go get "github.com/jaypipes/ghw@$GHW_VERSION" &&
			GOFLAGS="-mod=mod -buildvcs=false" go build -o "$gdir/ghw-scan" .) >"$gdir/build.log" 2>&1; then
			GHW_PROBE=$gdir/ghw-scan
		else
			log "WARNING: ghw probe did not build (see $gdir/build.log); skipping that column"
		fi
	else
		GHW_PROBE=$gdir/ghw-scan
	fi
fi

cat >"$RUN/sriovdp-config.json" <<EOF
{
  "resourceList": [
    {
      "resourceName": "bench_vfs",
      "deviceType": "netDevice",
      "selectors": {
        "vendors": ["$VENDOR"],
        "devices": ["$VF_DEVICE"],
        "drivers": ["$VF_DRIVER"]
      }
    }
  ]
}
EOF

# parse FILE KEY: the values of the "KEY value" lines of an in-node run.
values() { awk -v k="$2" '$1 == k {print $2}' "$1"; }

# check_count TOOL FILE WANT: every "n" line of FILE must be WANT.
check_count() {
	local tool=$1 file=$2 want=$3 got
	if grep -q '^e ' "$file"; then
		die "$tool: $(grep -m1 '^e ' "$file" | cut -c3-)"
	fi
	got=$(values "$file" n | sort -u | tr '\n' ' ')
	[[ $got == "$want " ]] || die "$tool found ${got:+${got% } }devices${got:- (no count)}, want $want VFs (output: $file)"
}

declare -A HW PEER PEERD GHW
for n in $SIZES; do
	name=bench-peers-$n
	node=$CACHE/nodes/$name
	out=$RUN/$n
	mkdir -p "$out" "$CACHE/nodes"
	if [[ -f $node/state.json ]]; then
		log "destroying a stale node at $node"
		"$HWNETCTL" virtual-node destroy --dir "$node" >/dev/null
	fi
	cat >"$out/spec.yaml" <<EOF
name: $name
pfs:
  - model: $MODEL
    totalVFs: $n
    vfs: $n
EOF
	log "[$n VFs] creating the virtual node"
	CURRENT_NODE=$node
	"$HWNETCTL" virtual-node create --spec "$out/spec.yaml" --dir "$node" >"$out/create.log" 2>&1 ||
		die "virtual-node create failed for $n VFs: $(tail -n 3 "$out/create.log")"

	settle
	log "[$n VFs] hwnet: 1 check run + $HWNET_RUNS timed runs of hwnetctl inventory -o json"
	"$HWNETCTL" virtual-node exec --dir "$node" -- bash "$SELF" __hwnet "$HWNETCTL" "$HWNET_RUNS" "$out" >"$out/hwnet.txt" ||
		die "hwnetctl inventory failed inside the node ($n VFs)"
	check_count "hwnet" "$out/hwnet.txt" "$n"
	HW[$n]=$(values "$out/hwnet.txt" t | median)

	if [[ -n $GHW_PROBE ]]; then
		settle
		log "[$n VFs] ghw scan: $HWNET_RUNS timed runs"
		"$HWNETCTL" virtual-node exec --dir "$node" -- bash "$SELF" __ghw "$GHW_PROBE" "$HWNET_RUNS" >"$out/ghw.txt" ||
			die "the ghw probe failed inside the node ($n VFs)"
		check_count "ghw scan" "$out/ghw.txt" "$n"
		GHW[$n]=$(values "$out/ghw.txt" t | median)
	fi

	if [[ -n $SRIOVDP ]]; then
		settle
		log "[$n VFs] sriovdp: $PEER_RUNS timed runs (up to ${PEER_TIMEOUT}s each)"
		"$HWNETCTL" virtual-node exec --dir "$node" -- bash "$SELF" __sriovdp "$SRIOVDP" "$RUN/sriovdp-config.json" "$PEER_RUNS" "$out" "$PEER_TIMEOUT" >"$out/sriovdp.txt" ||
			die "sriovdp failed inside the node ($n VFs); logs in $out"
		check_count "sriovdp" "$out/sriovdp.txt" "$n"
		PEER[$n]=$(values "$out/sriovdp.txt" t | median)
		PEERD[$n]=$(values "$out/sriovdp.txt" d | median || echo "")
	fi

	"$HWNETCTL" virtual-node destroy --dir "$node" >/dev/null
	CURRENT_NODE=""
done

# 4. The table.
cpu=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo)
{
	echo
	echo "Discovery time in ms, median of $HWNET_RUNS runs (hwnet, ghw scan)$([[ -z $SRIOVDP ]] || echo " and $PEER_RUNS runs (sriovdp)"); one $MODEL PF per node, its VFs on $VF_DRIVER."
	echo "machine: $(nproc) CPUs, ${cpu:-unknown CPU}, kernel $(uname -r), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
	echo "sriovdp: ${SRIOVDP_VERSION}; hwnet: $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown) (work tree)"
	[[ -z $GHW_PROBE ]] || echo "ghw scan: ghw $GHW_VERSION ghw.PCI() alone, the call sriovdp's discovery starts with (sriovdp pins its own ghw)"
	echo
	printf '%6s  %10s  %12s  %16s  %12s  %14s\n' "VFs/PF" "hwnet ms" "sriovdp ms" "sriovdp/hwnet" "ghw scan ms" "ghw scan/hwnet"
	for n in $SIZES; do
		h=${HW[$n]}
		p=${PEER[$n]:-}
		g=${GHW[$n]:-}
		printf '%6s  %10s  %12s  %16s  %12s  %14s\n' "$n" "$(us2ms "$h")" \
			"$([[ -n $p ]] && us2ms "$p" || echo n/a)" \
			"$([[ -n $p ]] && awk -v a="$p" -v b="$h" 'BEGIN{printf "%.1fx", a/b}' || echo n/a)" \
			"$([[ -n $g ]] && us2ms "$g" || echo n/a)" \
			"$([[ -n $g ]] && awk -v a="$g" -v b="$h" 'BEGIN{printf "%.1fx", a/b}' || echo n/a)"
	done
	if [[ -n $SRIOVDP ]]; then
		echo
		echo "sriovdp ms is start to '$PEER_READY' (devices discovered and selected); to '$PEER_DISCOVERED':"
		for n in $SIZES; do printf '  %s VFs: %s ms\n' "$n" "$([[ -n ${PEERD[$n]:-} ]] && us2ms "${PEERD[$n]}" || echo n/a)"; done
	fi
	echo
	echo "raw runs and logs: $RUN; total $((SECONDS - T0)) s"
} | tee "$RUN/table.txt"
