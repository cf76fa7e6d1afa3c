package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
)

func (c *Controller) syncAttachment(ctx context.Context, namespace, name string) error {
	obj, exists, err := c.attachments.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return err
	}
	pna, err := mnv1.FromUnstructured[mnv1.PodNetworkAttachment](obj)
	if err != nil {
		return err
	}
	client := c.opts.Dynamic.Resource(mnv1.PodNetworkAttachmentResource).Namespace(namespace)
	inUse := len(c.referencedBy(attachmentKey+namespace+"/"+name)) > 0
	if err := syncFinalizer(ctx, client, &pna.ObjectMeta, inUse); err != nil || pna.DeletionTimestamp != nil {
		return err
	}
	pn := c.podNetwork(pna.Spec.PodNetworkName)
	changed := false
	// The network's provider interprets the attachment's parameters.
	if pn != nil && pn.Spec.Provider == mnv1.Provider && len(pna.Spec.ParametersRefs) > 0 {
		changed = setConditions(&pna.Status.Conditions, pna.Generation, map[string]verdict{
			mnv1.ConditionParamsReady: c.paramsReady(pna.Spec.ParametersRefs, namespace),
		})
	}
	if setConditions(&pna.Status.Conditions, pna.Generation, map[string]verdict{mnv1.ConditionReady: attachmentReady(pna, pn)}) || changed {
		return updateStatus(ctx, client, pna)
	}
	return nil
}

// podNetwork is the informer's PodNetwork of that name, nil if none (or
// one being deleted, which no new attachment may use).
func (c *Controller) podNetwork(name string) *mnv1.PodNetwork {
	return live[mnv1.PodNetwork](c.podNetworks, name)
}

// attachment is the informer's PodNetworkAttachment, nil if none or being
// deleted.
func (c *Controller) attachment(namespace, name string) *mnv1.PodNetworkAttachment {
	return live[mnv1.PodNetworkAttachment](c.attachments, namespace+"/"+name)
}

// live is the informer's object at key, nil if there is none or it is
// being deleted.
func live[T mnv1.Object](inf cache.SharedIndexInformer, key string) *T {
	obj, exists, err := inf.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return nil
	}
	if m, ok := obj.(metav1.Object); !ok || m.GetDeletionTimestamp() != nil {
		return nil
	}
	out, err := mnv1.FromUnstructured[T](obj)
	if err != nil {
		return nil
	}
	return out
}
