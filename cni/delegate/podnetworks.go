package delegate

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/api/selection"
	"github.com/hwnet-io/hwnet/cni/cache"
)

// podNetworkRequests resolves the pod's KEP-3698 references into the
// NetworkAttachmentDefinitions that implement them: a PodNetworkAttachment's
// own parametersRef, which replaces its network's for this pod, or else the
// PodNetwork's. The "default" PodNetwork is the cluster-wide default
// network, attached first as always; isDefaultGW moves the pod's default
// route to the network that has it.
func (d *Delegator) podNetworkRequests(ctx context.Context, pod cache.Pod, defaultIfName string) ([]request, error) {
	nets, err := mnv1.ParseNetworks(pod.Annotations[mnv1.NetworksAnnotation])
	if err != nil {
		return nil, podFailure("InvalidNetworksAnnotation", err)
	}
	if d.opts.PodNetworks == nil {
		return nil, podFailure("NetworkNotFound", fmt.Errorf("annotation %s: this agent does not serve PodNetworks (no API server client)", mnv1.NetworksAnnotation))
	}
	var reqs []request
	for i, n := range nets {
		r, err := d.podNetworkRequest(ctx, pod.Namespace, n)
		if err != nil {
			return nil, fmt.Errorf("networks[%d]: %w", i, err)
		}
		if r.podNetwork == mnv1.DefaultPodNetwork {
			if n.InterfaceName != "" && n.InterfaceName != defaultIfName {
				return nil, podFailure("InvalidNetworksAnnotation", fmt.Errorf(
					"networks[%d]: the default PodNetwork is the pod's %s, not %q", i, defaultIfName, n.InterfaceName))
			}
			continue
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

func (d *Delegator) podNetworkRequest(ctx context.Context, namespace string, n mnv1.Network) (request, error) {
	pnName := n.Name
	var pnaRefs []mnv1.ParametersRef
	if n.AttachmentName != "" {
		pna, err := d.opts.PodNetworks.PodNetworkAttachment(ctx, namespace, n.AttachmentName)
		if err != nil {
			return request{}, lookupFailure(err)
		}
		if err := usable(pna.ObjectMeta, pna.Status.Conditions); err != nil {
			return request{}, podFailure("NetworkNotReady", fmt.Errorf("PodNetworkAttachment %s/%s: %w", namespace, pna.Name, err))
		}
		pnName, pnaRefs = pna.Spec.PodNetworkName, pna.Spec.ParametersRefs
	}
	pn, err := d.opts.PodNetworks.PodNetwork(ctx, pnName)
	if err != nil {
		return request{}, lookupFailure(err)
	}
	if err := usable(pn.ObjectMeta, pn.Status.Conditions); err != nil {
		return request{}, podFailure("NetworkNotReady", fmt.Errorf("PodNetwork %s: %w", pnName, err))
	}
	if pn.Spec.Provider != "" && pn.Spec.Provider != mnv1.Provider {
		return request{}, podFailure("InvalidNetwork", fmt.Errorf("PodNetwork %s: provider %q is not hwnet's (%q)", pnName, pn.Spec.Provider, mnv1.Provider))
	}
	sel := selection.Selection{Interface: n.InterfaceName, HasDefaultRoute: n.IsDefaultGW}
	r := request{sel: sel, podNetwork: pnName, adminChosen: true}
	if pnName == mnv1.DefaultPodNetwork {
		return r, nil
	}
	ref, ok := nadRef(pnaRefs, namespace)
	if ok {
		r.adminChosen = false // the app developer's own object chose it
	} else if ref, ok = nadRef(pn.Spec.ParametersRefs, ""); !ok {
		return request{}, podFailure("InvalidNetwork", fmt.Errorf(
			"PodNetwork %s: no NetworkAttachmentDefinition among its parametersRefs (provider %q)", pnName, pn.Spec.Provider))
	}
	r.sel.Namespace, r.sel.Name = ref.Namespace, ref.Name
	return r, nil
}

// nadRef is the first NetworkAttachmentDefinition reference, its namespace
// defaulted.
func nadRef(refs []mnv1.ParametersRef, defaultNamespace string) (mnv1.ParametersRef, bool) {
	for _, ref := range refs {
		if ref.IsNAD() {
			if ref.Namespace == "" {
				ref.Namespace = defaultNamespace
			}
			return ref, ref.Namespace != ""
		}
	}
	return mnv1.ParametersRef{}, false
}

// usable: the object is not being deleted and is Ready (KEP: pods cannot
// be attached to a network that is not Ready).
func usable(obj metav1.ObjectMeta, conds []metav1.Condition) error {
	if obj.DeletionTimestamp != nil {
		return errors.New("being deleted")
	}
	if err := mnv1.NotReadyNow(obj.Generation, conds); err != nil {
		return fmt.Errorf("not Ready: %w", err)
	}
	return nil
}

func lookupFailure(err error) error {
	if errors.Is(err, cache.ErrPodNetworkNotFound) {
		return podFailure("NetworkNotFound", err)
	}
	return err
}
