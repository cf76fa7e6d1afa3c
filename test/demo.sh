#!/usr/bin/env bash
# hwnet's main job for now: generate a fresh virtual SR-IOV node (the
# default spec: 2x E810-C with 8 VFs, VFs 6-7 on vfio-pci, NUMA 0 and 1;
# 1x ConnectX-6 InfiniBand with 4 VFs; a management NIC holding the
# default route), show its NIC inventory as hwnet sees it from inside the
# node and the resource pools deploy/pools.yaml makes of it, and tear the
# node down. KEEP=1 leaves the node up to explore.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  echo "demo: needs root (network namespaces, veth links and mounts)" >&2
  exit 1
fi
hwnetctl="$PWD/bin/hwnetctl"
out="$PWD/bin/demo-inventory.json"

# A node left by an earlier KEEP=1 run is replaced.
"$hwnetctl" virtual-node destroy >/dev/null 2>&1 || true
if [ "${KEEP:-0}" != 1 ]; then
  trap '"$hwnetctl" virtual-node destroy' EXIT
fi

echo "== hwnetctl virtual-node create (spec: node/virtualnode/default.yaml)"
"$hwnetctl" virtual-node create
echo
echo "== hwnetctl inventory, run inside the node (its sysfs over /sys, its netns)"
"$hwnetctl" virtual-node exec -- "$hwnetctl" inventory
"$hwnetctl" virtual-node exec -- "$hwnetctl" inventory -o json >"$out"
echo
echo "The same inventory as JSON (every field, 20-byte IPoIB addresses, GUIDs): $out"
echo
echo "== hwnetctl config check --config deploy/pools.yaml: the pools hwnet-agent would serve"
"$hwnetctl" virtual-node exec -- "$hwnetctl" config check --config "$PWD/deploy/pools.yaml"
if [ "${KEEP:-0}" = 1 ]; then
  echo "The node is kept: 'bin/hwnetctl virtual-node exec -- <command>' enters it,"
  echo "'bin/hwnetctl virtual-node destroy' removes it."
fi
