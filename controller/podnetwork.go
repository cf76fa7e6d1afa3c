package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
)

func (c *Controller) syncPodNetwork(ctx context.Context, name string) error {
	obj, exists, err := c.podNetworks.GetIndexer().GetByKey(name)
	if err != nil {
		return err
	}
	if !exists {
		if name == mnv1.DefaultPodNetwork && c.opts.CreateDefault {
			return c.createDefault(ctx)
		}
		return nil
	}
	pn, err := mnv1.FromUnstructured[mnv1.PodNetwork](obj)
	if err != nil {
		return err
	}
	client := c.opts.Dynamic.Resource(mnv1.PodNetworkResource)
	// "default" is in use by nearly every pod; rather than be held
	// Terminating it is recreated (KEP "Availability").
	inUse := name != mnv1.DefaultPodNetwork && c.podNetworkInUse(name)
	if err := syncFinalizer(ctx, client, &pn.ObjectMeta, inUse); err != nil || pn.DeletionTimestamp != nil {
		return err
	}
	changed := false
	if pn.Spec.Provider == mnv1.Provider && len(pn.Spec.ParametersRefs) > 0 {
		changed = setConditions(&pn.Status.Conditions, pn.Generation, map[string]verdict{
			mnv1.ConditionParamsReady: c.paramsReady(pn.Spec.ParametersRefs, ""),
		})
	}
	if setConditions(&pn.Status.Conditions, pn.Generation, map[string]verdict{mnv1.ConditionReady: podNetworkReady(pn)}) || changed {
		return updateStatus(ctx, client, pn)
	}
	return nil
}

// createDefault creates the Cluster Default PodNetwork, the KEP's exact
// object (KEP "Automatic creation").
func (c *Controller) createDefault(ctx context.Context) error {
	enabled := true
	pn, err := mnv1.ToUnstructured(&mnv1.PodNetwork{
		TypeMeta:   metav1.TypeMeta{APIVersion: mnv1.Group + "/" + mnv1.Version, Kind: "PodNetwork"},
		ObjectMeta: metav1.ObjectMeta{Name: mnv1.DefaultPodNetwork},
		Spec:       mnv1.PodNetworkSpec{Enabled: &enabled},
	})
	if err != nil {
		return err
	}
	_, err = c.opts.Dynamic.Resource(mnv1.PodNetworkResource).Create(ctx, pn, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the default PodNetwork: %w", err)
	}
	c.opts.Logger.Info("created the default PodNetwork")
	return nil
}

// podNetworkInUse: a pod that has not ended or a PodNetworkAttachment
// references the network (KEP "InUse state").
func (c *Controller) podNetworkInUse(name string) bool {
	if len(c.referencedBy(podNetworkKey+name)) > 0 {
		return true
	}
	pnas, _ := c.attachments.GetIndexer().ByIndex(byPodNetwork, name)
	return len(pnas) > 0
}

// syncFinalizer adds the InUse finalizer to an object in use and removes it
// from one that is not, with a patch that fails if the object changed
// since it was read.
func syncFinalizer(ctx context.Context, client dynamic.ResourceInterface, meta *metav1.ObjectMeta, inUse bool) error {
	has := slices.Contains(meta.Finalizers, mnv1.InUseFinalizer)
	if has == inUse {
		return nil
	}
	finalizers := slices.DeleteFunc(slices.Clone(meta.Finalizers), func(f string) bool { return f == mnv1.InUseFinalizer })
	if inUse {
		finalizers = append(finalizers, mnv1.InUseFinalizer)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": finalizers, "resourceVersion": meta.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = client.Patch(ctx, meta.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("set finalizer %s (in use: %v) on %s: %w", mnv1.InUseFinalizer, inUse, meta.Name, err)
	}
	return nil
}

// updateStatus writes obj's status; the update fails if obj changed since
// the informer saw it, and the retry reads it anew.
func updateStatus[T mnv1.Object](ctx context.Context, client dynamic.ResourceInterface, obj *T) error {
	u, err := mnv1.ToUnstructured(obj)
	if err != nil {
		return err
	}
	if _, err := client.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status of %s: %w", u.GetName(), err)
	}
	return nil
}
