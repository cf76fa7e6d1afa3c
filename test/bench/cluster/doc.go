// Package cluster measures pod start as users feel it on the e2e cluster
// (test/e2e/cluster): real kube-apiserver, scheduler, kubelet and
// containerd on one virtual SR-IOV node of its own, with hwnet's device
// plugin pools, the same pools in DRA mode (extended resources served by
// DRA), and the peer stack (Multus thick + the SR-IOV network device
// plugin, host-device delegates) deployed as DaemonSets, in interleaved
// rounds. Everything is in BenchmarkCluster (root; `make bench-cluster`),
// which prints one table of min/median/max over rounds with the ratios
// peer/hwnet and DRA/device plugin.
package cluster
