package dra

import (
	"context"
	"errors"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// create writes a new slice of spec and records it.
func (p *publisher) create(ctx context.Context, generateName string, spec resourceapi.ResourceSliceSpec) error {
	owner, err := p.ownerRef(ctx)
	if err != nil {
		return sliceErr("create", generateName+"*", err)
	}
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: generateName, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec:       spec,
	}
	got, err := p.client.Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		return sliceErr("create", generateName+"*", err)
	}
	p.stored(spec, got)
	return nil
}

// update writes spec into the recorded slice name at the resourceVersion
// hwnet knows; a conflict reads it again and retries.
func (p *publisher) update(ctx context.Context, name string, spec resourceapi.ResourceSliceSpec) error {
	err := p.onConflict(ctx, name, func() error {
		meta, err := p.objectMeta(ctx, name)
		if err != nil {
			return err
		}
		got, err := p.client.Update(ctx, &resourceapi.ResourceSlice{ObjectMeta: meta, Spec: spec}, metav1.UpdateOptions{})
		if err == nil {
			p.stored(spec, got)
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		delete(p.records, name)
		err = errGone
	}
	if err != nil {
		return sliceErr("update", name, err)
	}
	return nil
}

// objectMeta is the metadata an update writes: the labels, annotations,
// finalizers and owners the watch last saw on the slice stay, as they do
// in the library's update of its copy; without them, the Node as owner.
// The resourceVersion is the one hwnet knows.
func (p *publisher) objectMeta(ctx context.Context, name string) (metav1.ObjectMeta, error) {
	meta := metav1.ObjectMeta{Name: name, ResourceVersion: p.records[name].rv}
	if seen := p.meta(name); seen != nil {
		meta.Labels, meta.Annotations = seen.Labels, seen.Annotations
		meta.Finalizers, meta.OwnerReferences = seen.Finalizers, seen.OwnerReferences
		return meta, nil
	}
	owner, err := p.ownerRef(ctx)
	meta.OwnerReferences = []metav1.OwnerReference{owner}
	return meta, err
}

// remove deletes the recorded slice name at the resourceVersion hwnet
// knows, as the library does with its preconditions; a conflict reads it
// again and retries, and a slice already gone is fine.
func (p *publisher) remove(ctx context.Context, name string) error {
	err := p.onConflict(ctx, name, func() error {
		rv := p.records[name].rv
		return p.client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	})
	if err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, errGone) {
		return sliceErr("delete", name, err)
	}
	delete(p.records, name)
	return nil
}

// onConflict runs write until it succeeds or fails other than with a
// conflict (someone else wrote the slice since hwnet knew it), reading
// the slice's resourceVersion again before each retry, with client-go's
// backoff for conflicts.
func (p *publisher) onConflict(ctx context.Context, name string, write func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, retry.DefaultBackoff, func(ctx context.Context) (bool, error) {
		last = write()
		if !apierrors.IsConflict(last) {
			return true, last
		}
		return false, p.reread(ctx, name)
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}

// reread reads a slice's resourceVersion again after a conflict, by a
// list of its name: the agent's role may list its node's slices but not
// get one (deploy/dra/rbac.yaml). Someone else wrote it, so its hash is
// unknown: it is written again whatever it holds.
func (p *publisher) reread(ctx context.Context, name string) error {
	sel := p.selector()
	sel["metadata.name"] = name
	list, err := p.client.List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return sliceErr("read", name, err)
	}
	if len(list.Items) == 0 {
		delete(p.records, name)
		return errGone
	}
	r := p.records[name]
	r.rv, r.hash = list.Items[0].ResourceVersion, specHash{}
	return nil
}
