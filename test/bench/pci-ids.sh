#!/usr/bin/env bash
# Installs Debian's pci.ids when the machine has none: sriovdp reads PCI
# names through ghw, which needs it, and bench-cluster puts the host's copy
# in the peer's image. Used by peers.sh and cluster.sh.
set -euo pipefail
if [[ -f /usr/share/misc/pci.ids || -f /usr/share/hwdata/pci.ids ]]; then
	exit 0
fi
printf '==> installing pci.ids (sriovdp needs it)\n' >&2
apt-get install -y pci.ids >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y pci.ids >/dev/null; } ||
	{ printf 'no pci.ids and apt-get install pci.ids failed\n' >&2; exit 2; }
