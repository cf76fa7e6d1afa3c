package daemon

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSandboxMustExist: only a pod kubelet reports with a sandbox it has
// not begun to take down counts as one the runtime must list.
func TestSandboxMustExist(t *testing.T) {
	now := metav1.Now()
	ready := []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}}
	for _, tt := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"running", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, true},
		{"pending, sandbox ready", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: ready}}, true},
		{"pending, no sandbox yet", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, false},
		{"running, being deleted", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, false},
		{"succeeded", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded, Conditions: ready}}, false},
	} {
		if got := sandboxMustExist(&tt.pod); got != tt.want {
			t.Errorf("%s: sandboxMustExist = %v, want %v", tt.name, got, tt.want)
		}
	}
}
