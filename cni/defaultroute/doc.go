// Package defaultroute moves a pod's default route to the attachment whose
// selection element has a "default-route" key (NPWG multi-network
// specification v1.1, 4.1.2.1.9): after every attachment is added, the
// delegating plugin removes the default routes of all other interfaces,
// the cluster-wide default network's included, and routes by default
// through the listed gateways, in list order, on the chosen interface.
//
// It works on the pod's network namespace through a netlink socket opened
// in it (netlink.NewHandleAt, which enters the namespace on a locked thread
// only to open the socket), so no goroutine of the agent runs there.
package defaultroute
