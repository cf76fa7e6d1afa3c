package delegate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/api/selection"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// attachment is one network attachment to make: the default network's or
// one selected by the pod's annotation.
type attachment struct {
	// network is the status name: "namespace/name" of the
	// NetworkAttachmentDefinition, or the default network's name.
	network   string
	ifName    string
	isDefault bool
	sel       selection.Selection
	delegate  *netconf.Delegate
	resource  string
	deviceID  string
	// podNetwork is the KEP-3698 PodNetwork served, for its status.
	podNetwork string
	// claimDevice is the DRA claim's device the attachment uses, whose
	// claim status gets its networkData.
	claimDevice *netclaim.Device
}

// podError is a failure caused by what a pod asked for; the pod gets an
// Event with reason, so `kubectl describe pod` says what is wrong.
type podError struct {
	reason string
	err    error
}

func (e *podError) Error() string { return e.err.Error() }
func (e *podError) Unwrap() error { return e.err }

func podFailure(reason string, err error) error {
	return &podError{reason: reason, err: err}
}

// plan turns the pod's references into the attachments to make after the
// default network's, in order, with their devices assigned: the NPWG
// networks annotation's selections, or the KEP-3698 PodNetworks of the
// multinetwork.hwnet.io/networks annotation, never both.
func (d *Delegator) plan(ctx context.Context, pod cache.Pod, defaultIfName string) ([]attachment, error) {
	reqs, err := d.requests(ctx, pod, defaultIfName)
	if err != nil {
		return nil, err
	}
	claimed, err := d.podClaims(ctx, pod)
	if err != nil {
		return nil, err
	}
	creqs, err := d.claimRequests(ctx, pod, claimed)
	if err != nil {
		return nil, err
	}
	if reqs = append(reqs, creqs...); len(reqs) == 0 {
		return nil, nil
	}
	sels := make([]selection.Selection, len(reqs))
	for i, r := range reqs {
		sels[i] = r.sel
	}
	names, err := interfaceNames(sels, defaultIfName)
	if err != nil {
		return nil, podFailure("InvalidNetworksAnnotation", err)
	}
	atts := make([]attachment, len(reqs))
	for i, r := range reqs {
		a, err := d.resolve(ctx, pod, r)
		if err != nil {
			return nil, err
		}
		a.ifName = names[i]
		if r.claimDevice != nil {
			a.useClaimDevice(r.claimDevice)
		}
		atts[i] = a
	}
	if err := d.assignDevices(ctx, pod, atts, spareClaimDevices(claimed)); err != nil {
		return nil, err
	}
	return atts, nil
}

// request is one attachment a pod asks for, before its network is
// resolved.
type request struct {
	sel selection.Selection
	// podNetwork is the KEP-3698 PodNetwork the attachment serves, empty
	// for an NPWG selection.
	podNetwork string
	// adminChosen says an administrator's object (a PodNetwork) named the
	// NetworkAttachmentDefinition, so any namespace is allowed.
	adminChosen bool
	// claimDevice is the claimed device a claim's configuration attaches
	// (package netclaim), nil for an annotation's attachment.
	claimDevice *netclaim.Device
}

func (d *Delegator) requests(ctx context.Context, pod cache.Pod, defaultIfName string) ([]request, error) {
	if strings.TrimSpace(pod.Annotations[mnv1.NetworksAnnotation]) != "" {
		if strings.TrimSpace(pod.Annotations[selection.Annotation]) != "" {
			return nil, podFailure("InvalidNetworksAnnotation", fmt.Errorf(
				"the pod has both %s and %s: hwnet attaches through one of them, PodNetwork references or NetworkAttachmentDefinition selections",
				mnv1.NetworksAnnotation, selection.Annotation))
		}
		return d.podNetworkRequests(ctx, pod, defaultIfName)
	}
	sels, err := selection.Parse(pod.Annotations[selection.Annotation], pod.Namespace)
	if err != nil {
		return nil, podFailure("InvalidNetworksAnnotation", err)
	}
	reqs := make([]request, len(sels))
	for i, s := range sels {
		reqs[i] = request{sel: s}
	}
	return reqs, nil
}

// interfaceNames gives each selection its CNI_IFNAME: the one it asked for
// (NPWG 4.1.2.1.5), or net1, net2, ... by position, skipping names taken by
// another selection or the default network, so every name is unique in the
// container (4.2.1).
func interfaceNames(sels []selection.Selection, defaultIfName string) ([]string, error) {
	taken := map[string]bool{defaultIfName: true}
	for i, s := range sels {
		if s.Interface == "" {
			continue
		}
		if s.Interface == defaultIfName {
			return nil, fmt.Errorf("network %d (%q): \"interface\" %q is the cluster-wide default network's interface", i, s.Name, s.Interface)
		}
		if taken[s.Interface] {
			return nil, fmt.Errorf("network %d (%q): \"interface\" %q: another of the pod's networks (its annotation's or its claims') asks for it too", i, s.Name, s.Interface)
		}
		taken[s.Interface] = true
	}
	names := make([]string, len(sels))
	next := 1
	for i, s := range sels {
		if s.Interface != "" {
			names[i] = s.Interface
			continue
		}
		for taken["net"+strconv.Itoa(next)] {
			next++
		}
		names[i] = "net" + strconv.Itoa(next)
		taken[names[i]] = true
		next++
	}
	return names, nil
}

// resolve finds the configuration list a selection runs (NPWG 3.4.1) and
// checks that it can honour what the selection asks (4.1.2.1.3-4.1.2.1.8).
func (d *Delegator) resolve(ctx context.Context, pod cache.Pod, r request) (attachment, error) {
	s := r.sel
	ref := s.Ref()
	if !r.adminChosen {
		if err := d.opts.AllowedNamespaces.Check(pod.Namespace, s.Namespace); err != nil {
			return attachment{}, podFailure("NetworkNotAllowed", fmt.Errorf("network %s: pod %s/%s: %w", ref, pod.Namespace, pod.Name, err))
		}
	}
	nad, err := d.opts.NADs.NAD(ctx, s.Namespace, s.Name)
	if err != nil {
		if errors.Is(err, cache.ErrNADNotFound) {
			return attachment{}, podFailure("NetworkNotFound", fmt.Errorf("network %s: %w", ref, err))
		}
		return attachment{}, fmt.Errorf("network %s: %w", ref, err)
	}
	dl, err := d.configs.resolve(s.Namespace, s.Name, nad.Config, d.opts.ConfDir, d.skipOwnConf)
	if err != nil {
		return attachment{}, podFailure("InvalidNetwork", err)
	}
	if err := dl.Check(requiredCapabilities(s)...); err != nil {
		return attachment{}, podFailure("InvalidNetwork", err)
	}
	return attachment{network: ref, sel: s, delegate: dl, resource: nad.ResourceName, podNetwork: r.podNetwork}, nil
}

func (d *Delegator) skipOwnConf(path string) bool {
	return d.opts.OwnConfFile != "" && filepath.Base(path) == filepath.Base(d.opts.OwnConfFile)
}

// requiredCapabilities are the capabilities a selection's keys need some
// plugin of the list to declare; without one the attachment must fail.
func requiredCapabilities(s selection.Selection) []string {
	var caps []string
	if len(s.IPs) > 0 {
		caps = append(caps, "ips")
	}
	if s.MAC != "" {
		caps = append(caps, "mac")
	}
	if s.InfinibandGUID != "" {
		caps = append(caps, "infinibandGUID")
	}
	if len(s.PortMappings) > 0 {
		caps = append(caps, "portMappings")
	}
	if s.Bandwidth != nil {
		caps = append(caps, "bandwidth")
	}
	return caps
}

// capabilityArgs are the runtimeConfig values of a selection, in CNI
// CONVENTIONS.md form; libcni gives each plugin the ones it declares.
func (a attachment) capabilityArgs() map[string]interface{} {
	s := a.sel
	args := map[string]interface{}{}
	if len(s.IPs) > 0 {
		args["ips"] = s.IPs
	}
	if s.MAC != "" {
		args["mac"] = s.MAC
	}
	if s.InfinibandGUID != "" {
		args["infinibandGUID"] = s.InfinibandGUID
	}
	if len(s.PortMappings) > 0 {
		args["portMappings"] = s.RuntimePortMappings()
	}
	if s.Bandwidth != nil {
		args["bandwidth"] = s.Bandwidth.Runtime()
	}
	if a.deviceID != "" {
		args["deviceID"] = a.deviceID
	}
	return args
}
