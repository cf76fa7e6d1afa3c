package kubeapi

import (
	"context"
	"errors"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// TestPoolReusesEmptiedServer: with the pool on, the next test gets the
// server the last one used, emptied of its namespaces, objects and custom
// resources, its CustomResourceDefinitions kept; a server whose test made
// RBAC objects, or stopped it, is not handed out again, and Main's end
// stops the idle ones.
func TestPoolReusesEmptiedServer(t *testing.T) {
	Binaries(t)
	idle.enable()
	defer idle.close()
	nads := schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
	var first *Server
	var pids []int
	t.Run("makes", func(t *testing.T) {
		first = Start(t)
		pids = []int{first.apiserver.cmd.Process.Pid, first.etcd.cmd.Process.Pid}
		first.CreateNamespace(t, "a")
		first.ApplyCRD(t, nadCRDPath)
		ctx := context.Background()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "a"}}
		if _, err := first.Client().CoreV1().ConfigMaps("a").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
			"metadata": map[string]any{"name": "n", "namespace": "a"}, "spec": map[string]any{"config": bridgeConfig}}}
		if _, err := dynamic.NewForConfigOrDie(first.Config()).Resource(nads).Namespace("a").Create(ctx, nad, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("finds it empty", func(t *testing.T) {
		s := Start(t)
		if s != first {
			t.Fatal("a new server, want the one the last test left")
		}
		ctx := context.Background()
		if _, err := s.Client().CoreV1().Namespaces().Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace a of the last test: %v, want NotFound", err)
		}
		list, err := dynamic.NewForConfigOrDie(s.Config()).Resource(nads).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil || len(list.Items) != 0 {
			t.Errorf("NADs from the cache = %d, %v; want none, and the CRD kept", len(list.Items), err)
		}
		s.CreateNamespace(t, "a")
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r"}}
		if _, err := s.Client().RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("the server whose test made a ClusterRole still runs: process %d (kill 0: %v)", pid, err)
		}
	}
	var stopped *Server
	t.Run("stops it", func(t *testing.T) {
		stopped = Start(t)
		if stopped == first {
			t.Fatal("the server whose test made a ClusterRole was handed out again")
		}
		stopped.Stop(t)
		stopped.Restart(t)
	})
	t.Run("after a stop", func(t *testing.T) {
		if s := Start(t); s == stopped {
			t.Error("a server its test stopped was handed out again")
		}
	})
	var last *Server
	t.Run("idle at the end", func(t *testing.T) {
		last = Start(t)
		pids = []int{last.apiserver.cmd.Process.Pid, last.etcd.cmd.Process.Pid}
	})
	if err := idle.close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("an idle server still runs after the pool closed: process %d (kill 0: %v)", pid, err)
		}
	}
}
