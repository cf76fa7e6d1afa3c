// Package virtualnode builds, enters and tears down a virtual SR-IOV node:
// a generated sysfs tree that looks like a real SR-IOV host's, whose
// netdevs are real veth links in a network namespace of their own.
//
// The tree (Dir/sys, Dir/dev) has what hardware discovery reads on a real
// host, laid out as the kernel does with relative symlinks: PCI functions
// under devices/pci0000:XX/<root port>/, one root port and bus per NIC; on
// PFs the sriov_* attributes and virtfnN links, on VFs physfn; driver and
// iommu_group links; net/<ifname> with predictable names (enp59s0f0,
// enp59s0f0v3, ibp65s0f0v1) and 20-byte IPoIB addresses; RDMA devices
// under infiniband/ with their uverbs, umad and issm nodes, and the
// node's rdma_cm; UIO devices under uio/ for uio_pci_generic and igb_uio;
// mlx5 scalable functions as auxiliary devices below their PF
// (mlx5_core.sf.N with sfnum, netdev and RDMA device); and the bus/pci,
// bus/auxiliary, class/net, class/infiniband, kernel/iommu_groups and
// devices/system/node views.
// Writes into the tree do nothing by themselves: Node's methods change
// the hardware, and EnactWrites calls them for the writes a program makes
// to the kernel's attributes (sriov_numvfs, unbind, bind, drivers_probe).
// Once the tree shows a change, they broadcast the PCI uevents the kernel
// would send (add, bind, unbind, remove) on the uevent socket of the
// node's netns, where the kernel itself sends the veths' net uevents, so
// that a watcher in the node hears of it as on a real host.
//
// With Options.Links, each netdev is one end of a veth pair in the netns
// NetnsPrefix+name and the tree records the link's real ifindex and MAC;
// the other end plays the function's representor. Run and Exec enter the
// node through a private mount namespace with the tree bound over /sys and
// its device files laid over /dev, so unmodified tools (ip, CNI plugins,
// ghw) see the virtual hardware.
//
// A spec declares the node (see default.yaml); NIC models come from hwdb.
package virtualnode
