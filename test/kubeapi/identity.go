package kubeapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// PodToken is base with its credentials dropped (it keeps how it trusts
// the server) and a token of pod's service account bound to pod instead,
// as kubelet mounts it in the pod: the token names the pod's node
// (authentication.kubernetes.io/node-name), which the admission policies
// hold each identity to. admin asks for the token.
func PodToken(ctx context.Context, admin kubernetes.Interface, base *rest.Config, pod *corev1.Pod) (*rest.Config, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}
	tok, err := admin.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	cfg := rest.AnonymousClientConfig(base)
	cfg.BearerToken = tok.Status.Token
	return cfg, nil
}

// CheckWrite reports a write of an identity matrix that did not end as
// wanted: allowed when refused is empty, else refused with an error that
// contains refused (the policy's message, or the API server's own refusal
// where it narrows the write itself). Refusals are logged.
func CheckWrite(t *testing.T, name, refused string, err error) {
	t.Helper()
	switch {
	case refused == "" && err != nil:
		t.Errorf("%s: %v, want allowed", name, err)
	case refused != "" && err == nil:
		t.Errorf("%s: allowed, want refused with %q", name, refused)
	case refused != "" && !strings.Contains(err.Error(), refused):
		t.Errorf("%s: %v, want refused with %q", name, err, refused)
	case err != nil:
		t.Logf("%s: %v", name, err)
	}
}

// NamespaceUser makes a namespace user of ns: a ServiceAccount "tenant"
// whose Role grants only rules in ns, and returns base with its
// credentials dropped and a token of that account instead. admin makes
// them; ns must exist.
func NamespaceUser(ctx context.Context, admin kubernetes.Interface, base *rest.Config, ns string, rules []rbacv1.PolicyRule) (*rest.Config, error) {
	meta := metav1.ObjectMeta{Name: "tenant", Namespace: ns}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"}}
	_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
	if err == nil {
		_, err = admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: rules}, metav1.CreateOptions{})
	}
	if err == nil {
		_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("namespace user of %s: %w", ns, err)
	}
	tok, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "tenant", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("namespace user of %s: token: %w", ns, err)
	}
	cfg := rest.AnonymousClientConfig(base)
	cfg.BearerToken = tok.Status.Token
	return cfg, nil
}
