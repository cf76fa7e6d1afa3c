// Package peers measures hwnet's whole processes beside its peers on one
// virtual SR-IOV node: hwnet-agent and the SR-IOV network device plugin
// (sriovdp) as kubelet sees them, and the hwnet CNI shim with its agent
// beside Multus thin and thick as a container runtime executes them.
// Everything is in BenchmarkPeers (go test -bench Peers, as root), which
// test/bench/peers.sh (make bench-peers) runs after building the peers;
// it prints one table of min/median/max per tool and the peers' ratios to
// hwnet. A peer not given is reported as absent and hwnet is measured
// alone.
package peers
