// Package controller is the PodNetwork controller of KEP-3698 ("PodNetwork
// Controller"), run by hwnet-controller: it keeps the Ready and ParamsReady
// conditions of PodNetworks and PodNetworkAttachments, holds the InUse
// finalizer on each while a pod that has not ended (or, for a PodNetwork,
// a PodNetworkAttachment) references it, creates the "default" PodNetwork
// and recreates it when deleted, and lifts the scheduling gate admission
// puts on pods that reference networks once every one of them is present
// and Ready (the KEP's active validations), with a pod Event naming the
// network that holds the pod back.
//
// Every decision is a function of the informers' current state, never of
// the event that triggered it, so a restarted or newly elected controller
// reaches the same conditions and finalizers and writes nothing when they
// already hold.
package controller
