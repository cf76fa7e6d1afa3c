package daemon

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The agent stopping ends the PodResources calls under way: a Get waiting
// for a kubelet that is down (a pod event's early Get waits up to 30 s)
// must not hold up the CNI server's shutdown, and with it the agent's.
func TestKubeletDevicesCallsEndWithTheDaemon(t *testing.T) {
	life, stop := context.WithCancel(context.Background())
	k := &kubeletDevices{life: life, socket: filepath.Join(t.TempDir(), "kubelet-down.sock")}
	var calls sync.WaitGroup
	for range 3 {
		calls.Go(func() {
			if _, err := k.Get(context.Background(), "ns", "p"); err == nil {
				t.Error("Get of a kubelet that is down succeeded")
			}
		})
	}
	stop()
	ended := make(chan struct{})
	go func() {
		calls.Wait()
		k.close()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(20 * time.Second): // the Gets have no deadline of their own
		t.Fatal("PodResources Gets and close still waiting for kubelet 20 s after the daemon stopped")
	}
}
