package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/controller"
)

// controllerUser is the identity the tests of RBAC run the controller as.
const controllerUser = "hwnet-controller-under-test"

// controllerRules are what the controller needs, with podnetworks' verbs
// given apart so a test can withhold one.
func controllerRules(podNetworkVerbs ...string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{mnv1.Group}, Resources: []string{"podnetworks"}, Verbs: podNetworkVerbs},
		{APIGroups: []string{mnv1.Group}, Resources: []string{"podnetworkattachments", "podnetworks/status", "podnetworkattachments/status"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/status", "events"}, Verbs: []string{"*"}},
		{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"network-attachment-definitions"}, Verbs: []string{"*"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}},
	}
}

// grant sets the controller user's ClusterRole to rules, creating it and
// its binding the first time.
func (c *cluster) grant(t *testing.T, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	roles := c.kube.RbacV1().ClusterRoles()
	role, err := roles.Get(ctx, controllerUser, metav1.GetOptions{})
	if err != nil {
		role = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: controllerUser}, Rules: rules}
		if _, err := roles.Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: controllerUser},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: controllerUser},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: controllerUser}}}
		if _, err := c.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	role.Rules = rules
	if _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// forbiddenGets counts the API server's 403 answers to reads of one
// PodNetwork made through cfg.
func forbiddenGets(cfg *rest.Config) (*rest.Config, *atomic.Int64) {
	var n atomic.Int64
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			named := strings.Contains(req.URL.Path, "/podnetworks/")
			if err == nil && req.Method == http.MethodGet && named && resp.StatusCode == http.StatusForbidden {
				n.Add(1)
			}
			return resp, err
		})
	})
	return cfg, &n
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestKEP3698_GateCheckRetriedAfterError: the fresh read of a pod's
// network before its gate is lifted fails once (the controller may not
// yet get PodNetworks: an RBAC denial, fixed afterwards). The check is
// retried with backoff and the gate lifted, though nothing about the
// network changes, so no informer event would enqueue the pod again.
func TestKEP3698_GateCheckRetriedAfterError(t *testing.T) {
	c := newCluster(t)
	c.grant(t, controllerRules("list", "watch", "create", "patch"))
	cfg := c.api.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerUser}
	cfg, denied := forbiddenGets(cfg)
	c.run(t, cfg, "a", controller.Options{CreateDefault: true})
	c.createNAD(t, "sriov-net", sriovConfig)
	c.createPodNetwork(t, "dataplane", true, "sriov-net")
	c.waitCondition(t, "dataplane", mnv1.ConditionReady, metav1.ConditionTrue, mnv1.ReasonReady)

	c.createPod(t, "cnf", `[{"name":"dataplane"}]`)
	waitFor(t, "the controller's read of PodNetwork dataplane denied", func() (bool, string) {
		return denied.Load() > 0, fmt.Sprintf("%d denials", denied.Load())
	})
	c.grant(t, controllerRules("get", "list", "watch", "create", "patch"))
	waitFor(t, "pod cnf released", func() (bool, string) {
		gates := c.gates(t, "cnf")
		return len(gates) == 0, fmt.Sprint(gates)
	})
}

// podScheduled waits until the pod's PodScheduled condition is False
// with reason SchedulingGated and a message holding want.
func (c *cluster) podScheduled(t *testing.T, pod, want string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("pod %s PodScheduled=False (SchedulingGated) saying %q", pod, want), func() (bool, string) {
		p, err := c.kube.CoreV1().Pods("default").Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled {
				return cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonSchedulingGated && strings.Contains(cond.Message, want),
					fmt.Sprintf("%+v", cond)
			}
		}
		return false, fmt.Sprintf("conditions %+v", p.Status.Conditions)
	})
}

// TestKEP3698_PodScheduledSaysWhy: a pod held for its networks says on
// its PodScheduled condition which network it waits for and why (KEP
// "Scheduler changes"), each new reason in turn, while the real
// kube-scheduler runs and would write the condition of a pod it could
// not place: it leaves a gated pod's alone.
func TestKEP3698_PodScheduledSaysWhy(t *testing.T) {
	c := newCluster(t)
	c.api.StartScheduler(t)
	c.run(t, c.api.Config(), "a", controller.Options{CreateDefault: true})
	c.createNAD(t, "sriov-net", sriovConfig)
	c.createPodNetwork(t, "dataplane", false, "sriov-net")
	c.waitCondition(t, "dataplane", mnv1.ConditionReady, metav1.ConditionFalse, mnv1.ReasonAdministrativelyDisabled)

	c.createPod(t, "cnf", `[{"name":"dataplane"}]`)
	c.podScheduled(t, "cnf", "networks[0] (PodNetwork dataplane): PodNetwork dataplane is not Ready: AdministrativelyDisabled")
	c.createPod(t, "via-pna", `[{"attachmentName":"fast"}]`)
	c.podScheduled(t, "via-pna", "networks[0]: PodNetworkAttachment default/fast does not exist")
	c.createAttachment(t, "fast", "dataplane")
	c.podScheduled(t, "via-pna", "PodNetworkAttachment default/fast is not Ready")

	// The scheduler is at work: an ungated pod, with no node to go to, gets
	// its verdict; the gated pods keep the controller's.
	c.createPod(t, "ungated", "")
	waitFor(t, "the scheduler to find no node for pod ungated", func() (bool, string) {
		p, err := c.kube.CoreV1().Pods("default").Get(context.Background(), "ungated", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %+v", p.Status.Conditions)
	})
	c.podScheduled(t, "cnf", "PodNetwork dataplane is not Ready: AdministrativelyDisabled")
	c.podScheduled(t, "via-pna", "PodNetworkAttachment default/fast is not Ready")
}
