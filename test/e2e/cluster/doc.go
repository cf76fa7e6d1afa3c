// Package cluster runs a real Kubernetes (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd with runc, kubelet and
// the reference CNI plugins) on this machine, inside private namespaces
// that also hold a virtual SR-IOV node (node/virtualnode), so that kubelet,
// containerd, CNI plugins and pods such as hwnet-agent all see the same
// virtual hardware. A cluster is one node by default; Config.Workers adds
// nodes (see Several nodes below).
//
// Up starts everything detached (own session, no parent-death signal): a
// cluster outlives the process that brought it up. Its state file records
// every process by PID and start time, so Open attaches to it from another
// process and Down tears it down from there, also after a crash half way up.
//
// # Namespaces
//
// The cluster's network namespace is the virtual node's (hwnet-vn-<name>):
// the VF veths are node netdevs. A holder process (`unshare --mount
// --propagation slave sleep infinity`, entered into that netns by nsenter)
// owns a mount namespace in which Up mounts, never touching the host's:
//
//   - /sys: a tmpfs composed of bind mounts, see below;
//   - / made shared within the namespace, as on a systemd host: containerd
//     refuses HostToContainer volumes (hwnet-agent's /var/run/netns) from
//     private mounts;
//   - /dev, /etc and /opt: overlays of the host's whose writes go to
//     StateDir/overlay. /dev has StateDir/dev as a further layer, with
//     StateDir/dev/vfio and StateDir/dev/infiniband bound on top: character
//     devices for the virtual node's device files, which the kernel here
//     has no driver for (see SyncDevices). StateDir/cni/net.d is bound on
//     /etc/cni/net.d and StateDir/cni/bin, a copy of the reference plugins,
//     on /opt/cni/bin;
//   - over /proc/sys, files with the values kubelet would otherwise set in
//     the host's (not namespaced) vm and kernel sysctls;
//   - /run: a tmpfs, where containerd puts pod network namespaces
//     (/var/run/netns) and sockets;
//   - /var/lib: StateDir/var-lib (kubelet, containerd, CNI state; the
//     device plugin and pod resources sockets under /var/lib/kubelet);
//   - /var/log: StateDir/var-log (pod logs: a kubelet removes the log
//     directories of pods it does not know, another cluster's included);
//   - StateDir again at its own path when /run or /var/lib hid it, so every
//     path in the cluster's configuration means the same inside and out.
//
// hwnet-vnode-kernel, beside them on the host, does what the kernel does
// for a real VF and cannot for a veth: when a pod's network namespace
// holding a VF's netdev is destroyed, the netdev comes back to the node's
// (virtualnode.Node.ReturnNetdevs); it enacts writes to the tree's
// attributes and, as devtmpfs would, mirrors the node's device files into
// StateDir/dev after each (virtualnode.Node.EnactWritesInto).
//
// The default pod network is /etc/cni/net.d/10-podnet.conflist: bridge
// cni0 with host-local addresses from 10.244.0.0/24. hwnet-agent writes
// its 00-hwnet.conflist next to it.
//
// # /sys
//
// The virtual node's tree must be /sys for hwnet, ghw and the CNI plugins,
// its relative links climbing to the tree's root, while kubelet, cadvisor
// and runc need the real cgroups, CPU and NUMA topology and huge pages.
// /sys is therefore a tmpfs whose entries are bind mounts: at each level
// the virtual tree's entry wins, except for realSysEntries (fs,
// devices/system, devices/virtual/block, kernel/mm), which come from the
// real sysfs; entries only one side has come from that side. So /sys/bus,
// /sys/class, /sys/devices/pci* and /sys/kernel/iommu_groups are the
// virtual node's, bound live (VFs that SetNumVFs adds appear), and
// /sys/fs/cgroup and /sys/devices/system are the machine's.
//
// # Network
//
// The node IP is the address of the virtual node's management NIC, the one
// holding the default route (10.255.0.2 in the default spec; a spec without
// such a NIC gets the default spec's). No kube-proxy runs: the kubernetes
// Service's address 10.0.0.1 is on the namespace's loopback and
// kube-apiserver listens on port 443, so in-cluster clients (hwnet-agent
// with hostNetwork, and pods on the bridge) reach it as they would through
// kube-proxy. Processes outside the namespaces use RESTConfig, which dials
// from inside the network namespace.
//
// # Several nodes
//
// With Config.Workers, the node described above is the control plane and
// each worker is a node of its own: its own virtual node and network
// namespace, holder and mount namespace, cgroups, hwnet-vnode-kernel,
// containerd and kubelet, with its state under StateDir/nodes/NAME (so
// Down of the control plane takes the workers down first). The fabric
// (fabric.go) joins them: a bridge in the control plane's namespace and a
// veth to each worker. Node i has the fabric address 10.250.0.<i+1>, its
// InternalIP, and the pod subnet 10.244.<i>.0/24; every node routes the
// other nodes' pod subnets through their fabric addresses, so pods reach
// each other across nodes without encapsulation. On a worker the
// kubernetes Service's address leads to the control plane's kube-apiserver
// by DNAT (iptables in the worker's namespace), as kube-proxy would do.
// The workers' kubelet credentials come from the control plane's CA.
//
// # Cgroups
//
// Every process Up starts lives in /hwnet-e2e/<name>/system, and through
// kubelet's cgroupRoot /hwnet-e2e/<name> every pod under it, in each cgroup
// hierarchy; Down kills what is left there and removes the cgroups.
package cluster
