package kubeapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// WaitNodeEvent waits until the node has an Event of the reason whose
// message contains message, and returns that message.
func WaitNodeEvent(t testing.TB, client kubernetes.Interface, node, reason, message string) string {
	t.Helper()
	var found string
	WaitFor(t, fmt.Sprintf("a Node Event %s with %q", reason, message), func() bool {
		list, err := client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if strings.Contains(e.Message, message) {
				found = e.Message
				return true
			}
		}
		return false
	})
	return found
}
