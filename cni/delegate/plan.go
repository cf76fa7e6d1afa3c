package delegate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/cni/kube"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/cni/selection"
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

// plan turns the pod's annotation into the attachments to make after the
// default network's, in annotation order, with their devices assigned.
func (d *Delegator) plan(ctx context.Context, pod kube.Pod, defaultIfName string) ([]attachment, error) {
	sels, err := selection.Parse(pod.Annotations[selection.Annotation], pod.Namespace)
	if err != nil {
		return nil, podFailure("InvalidNetworksAnnotation", err)
	}
	if len(sels) == 0 {
		return nil, nil
	}
	names, err := interfaceNames(sels, defaultIfName)
	if err != nil {
		return nil, podFailure("InvalidNetworksAnnotation", err)
	}
	atts := make([]attachment, len(sels))
	for i, s := range sels {
		a, err := d.resolve(ctx, pod, s)
		if err != nil {
			return nil, err
		}
		a.ifName = names[i]
		atts[i] = a
	}
	if err := d.assignDevices(ctx, pod, atts); err != nil {
		return nil, err
	}
	return atts, nil
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
			return nil, fmt.Errorf("networks annotation element %d (%q): \"interface\" %q is the cluster-wide default network's interface", i, s.Name, s.Interface)
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
func (d *Delegator) resolve(ctx context.Context, pod kube.Pod, s selection.Selection) (attachment, error) {
	ref := s.Ref()
	if !d.namespaceAllowed(pod.Namespace, s.Namespace) {
		return attachment{}, podFailure("NetworkNotAllowed", fmt.Errorf(
			"network %s: pods in namespace %q may not select NetworkAttachmentDefinitions in namespace %q (allowed: their own and %s; see the agent's --cni-allowed-namespaces)",
			ref, pod.Namespace, s.Namespace, strings.Join(d.opts.AllowedNamespaces, ", ")))
	}
	nad, err := d.opts.NADs.NAD(ctx, s.Namespace, s.Name)
	if err != nil {
		if errors.Is(err, kube.ErrNADNotFound) {
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
	return attachment{network: ref, sel: s, delegate: dl, resource: nad.ResourceName}, nil
}

func (d *Delegator) skipOwnConf(path string) bool {
	return d.opts.OwnConfFile != "" && filepath.Base(path) == filepath.Base(d.opts.OwnConfFile)
}

func (d *Delegator) namespaceAllowed(podNamespace, nadNamespace string) bool {
	return nadNamespace == podNamespace ||
		slices.Contains(d.opts.AllowedNamespaces, nadNamespace) ||
		slices.Contains(d.opts.AllowedNamespaces, "*")
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
