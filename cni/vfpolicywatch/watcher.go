// Package vfpolicywatch keeps the agent's copy of the VFSettingsPolicy
// (api/vfpolicy) and of the namespaces' labels its selectors match, from
// an informer of the one object and, once a rule selects namespaces by
// their labels, one of the namespaces, and judges with them the VF
// settings a claim (at DRA prepare) or a NetworkAttachmentDefinition (at
// CNI ADD) asks for. It lives in cni/ because both the CNI side and the
// DRA driver, which imports cni/, check with it; node/ is the node's
// hardware, not API objects.
//
// It fails closed: until the object is listed (and the namespaces, for a
// policy that selects by labels), while it is absent, or while it is
// invalid, the policy is unknown and every setting is refused, saying why.
package vfpolicywatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hwnet-io/hwnet/api/vfpolicy"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/internal/kubeclient"
)

// Watcher follows the policy object and, from the first policy that
// selects namespaces by labels on, the namespaces' labels. Check is safe
// for concurrent use.
type Watcher struct {
	log       *slog.Logger
	client    kubernetes.Interface
	policy    cache.SharedIndexInformer
	policyReg cache.ResourceEventHandlerRegistration
	// run is Run's context, which the namespaces' informer runs in.
	run context.Context
	// labels follows the namespaces once a policy selects them by
	// labels: a policy that names its namespaces keeps no watch of
	// every namespace on every node.
	labels      atomic.Pointer[labelWatch]
	startLabels sync.Once
	// current is the decoded object, nil while none is known.
	current atomic.Pointer[vfpolicy.View]
	// lastErr is the informer's last list or watch error, for the
	// message while the policy is not read yet.
	lastErr atomic.Pointer[string]
	err     error // from setting the policy's informer up
}

// New returns a Watcher reading through client and dyn; Run feeds it. A
// nil log logs nothing.
func New(client kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger) *Watcher {
	onlyHwnet := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", vfpolicy.Name).String()
		kubeclient.QuietKind(o)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		log:    log,
		client: client,
		policy: dynamicinformer.NewFilteredDynamicInformer(dyn, vfpolicy.Resource, metav1.NamespaceAll, 0, cache.Indexers{}, onlyHwnet).Informer(),
	}
	var err error
	w.policyReg, err = w.policy.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.onPolicy,
		UpdateFunc: func(_, obj any) { w.onPolicy(obj) },
		DeleteFunc: w.onPolicyDeleted,
	})
	w.err = errors.Join(err, w.policy.SetWatchErrorHandler(w.onWatchError))
	return w
}

// Run follows the policy, and the namespaces once it selects by labels,
// until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	if w.err != nil {
		return fmt.Errorf("VFSettingsPolicy informer: %w", w.err)
	}
	w.run = ctx
	w.policy.RunWithContext(ctx)
	return nil
}

// HasSynced says whether the policy is listed, and the namespaces when
// it selects by their labels.
func (w *Watcher) HasSynced() bool {
	return w.err == nil && w.policyReg.HasSynced() && w.labelsUnknown(w.current.Load()) == ""
}

// labelWatch is the namespaces' informer, made once a policy
// selects by labels.
type labelWatch struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
	err      error // from setting it up
}

// followLabels starts following the namespaces' labels, once.
func (w *Watcher) followLabels() {
	w.startLabels.Do(func() {
		l := &labelWatch{informer: coreinformers.NewFilteredNamespaceInformer(w.client, 0, cache.Indexers{}, kubeclient.QuietKind)}
		// The namespaces' labels are all a rule reads of them.
		errTransform := l.informer.SetTransform(stripNamespace)
		var errHandler error
		l.reg, errHandler = l.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{})
		if l.err = errors.Join(errTransform, errHandler); l.err == nil {
			go l.informer.RunWithContext(w.run)
		}
		w.labels.Store(l)
		w.log.Info("following the namespaces' labels: a VFSettingsPolicy rule selects namespaces by them")
	})
}

// labelsUnknown says why the namespaces' labels v judges by are not
// known, "" when they are or v reads none.
func (w *Watcher) labelsUnknown(v *vfpolicy.View) string {
	if v == nil || v.Spec == nil || !v.Spec.SelectsByLabels() {
		return ""
	}
	switch l := w.labels.Load(); {
	case l == nil || (l.err == nil && !l.reg.HasSynced()):
		return "the namespaces' labels are not read from the API server yet"
	case l.err != nil:
		return fmt.Sprintf("the namespaces' informer could not start: %v", l.err)
	}
	return ""
}

// Check judges the settings an object of namespace asks for, spelled as
// sp (vfpolicy.Evaluate): nil, or the refusal to give the user.
func (w *Watcher) Check(namespace string, s vfsettings.Settings, sp vfpolicy.Spelling) error {
	if s.IsZero() {
		return nil
	}
	return vfpolicy.Evaluate(w.View(), vfpolicy.Namespace{Name: namespace, Labels: w.labelsOf(namespace)}, s, sp)
}

// View is the policy as the watcher knows it now.
func (w *Watcher) View() vfpolicy.View {
	switch {
	case w.err != nil:
		return vfpolicy.View{Unknown: fmt.Sprintf("its informer could not start: %v", w.err)}
	case !w.policyReg.HasSynced():
		why := "not read from the API server yet"
		if e := w.lastErr.Load(); e != nil {
			why += ": " + *e
		}
		return vfpolicy.View{Unknown: why}
	}
	v := w.current.Load()
	if v == nil {
		return vfpolicy.View{Unknown: fmt.Sprintf("no %s named %s exists", vfpolicy.Kind, vfpolicy.Name)}
	}
	if why := w.labelsUnknown(v); why != "" {
		return vfpolicy.View{Unknown: why}
	}
	return *v
}

// labelsOf are the namespace's labels, none for a namespace not
// listed or while no policy selects by them.
func (w *Watcher) labelsOf(namespace string) map[string]string {
	l := w.labels.Load()
	if l == nil {
		return nil
	}
	obj, ok, err := l.informer.GetStore().GetByKey(namespace)
	if err != nil || !ok {
		return nil
	}
	if ns, ok := obj.(*corev1.Namespace); ok {
		return ns.Labels
	}
	return nil
}

func (w *Watcher) onPolicy(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetName() != vfpolicy.Name {
		return
	}
	v := decode(u)
	if v.Spec != nil && v.Spec.SelectsByLabels() {
		w.followLabels()
	}
	if v.Spec == nil {
		w.log.Error("VFSettingsPolicy unusable: every VF setting of claims and NetworkAttachmentDefinitions is refused", "err", v.Unknown)
	} else {
		w.log.Info("VFSettingsPolicy read", "rules", len(v.Spec.Rules), "resourceVersion", u.GetResourceVersion())
	}
	w.current.Store(&v)
}

func (w *Watcher) onPolicyDeleted(any) {
	w.log.Warn("VFSettingsPolicy deleted: every VF setting of claims and NetworkAttachmentDefinitions is refused")
	w.current.Store(nil)
}

func (w *Watcher) onWatchError(_ *cache.Reflector, err error) {
	msg := err.Error()
	w.lastErr.Store(&msg)
}

// decode reads the object's spec, an unknown View naming the error when
// it is invalid.
func decode(u *unstructured.Unstructured) vfpolicy.View {
	raw, err := json.Marshal(u.Object["spec"])
	if err == nil {
		var spec vfpolicy.Spec
		if spec, err = vfpolicy.DecodeSpec(raw); err == nil {
			return vfpolicy.View{Spec: &spec}
		}
	}
	return vfpolicy.View{Unknown: fmt.Sprintf("invalid: %v", err)}
}

// stripNamespace keeps what a rule reads of a namespace: name and labels.
func stripNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels, ResourceVersion: ns.ResourceVersion}}, nil
}
