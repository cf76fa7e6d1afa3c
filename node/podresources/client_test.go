package podresources_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/podresources"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func dial(t *testing.T, socket string) *podresources.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := podresources.Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// du0 is testPods' first pod as the client reports it.
var du0 = podresources.Pod{Namespace: "ran", Name: "du-0", Containers: []podresources.Container{
	{Name: "proxy", Devices: map[string][]string{"hwnet.io/e810": {"0000:3b:01.3"}}},
	{Name: "du", Devices: map[string][]string{
		"hwnet.io/e810":  {"0000:3b:01.0", "0000:3e:01.1"},
		"nvidia.com/gpu": {"GPU-1"},
	}},
	{Name: "logger"},
}}

func TestList(t *testing.T) {
	k := &kubelet{pods: testPods()}
	pods, err := dial(t, k.serve(t)).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 {
		t.Fatalf("List returned %d pods, want 3", len(pods))
	}
	if !reflect.DeepEqual(pods[0], du0) {
		t.Errorf("List()[0] = %+v, want %+v", pods[0], du0)
	}
}

func TestGet(t *testing.T) {
	tests := []struct {
		name string
		get  getMode
		// wantGets and wantLists are the calls two Gets make.
		wantGets, wantLists int
	}{
		{"served", getServed, 2, 0},
		{"unimplemented falls back to List", getUnimplemented, 1, 2},
		{"disabled falls back to List", getDisabled, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &kubelet{pods: testPods(), get: tt.get}
			c := dial(t, k.serve(t))
			for range 2 {
				pod, err := c.Get(context.Background(), "ran", "du-0")
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(pod, du0) {
					t.Errorf("Get = %+v, want %+v", pod, du0)
				}
			}
			if gets, lists := k.count("Get"), k.count("List"); gets != tt.wantGets || lists != tt.wantLists {
				t.Errorf("two Gets made %d Get and %d List calls, want %d and %d", gets, lists, tt.wantGets, tt.wantLists)
			}
			_, err := c.Get(context.Background(), "ran", "du-1")
			if !errors.Is(err, podresources.ErrPodNotFound) || !strings.Contains(err.Error(), "ran/du-1") {
				t.Errorf("Get of a missing pod: error %v, want ErrPodNotFound naming ran/du-1", err)
			}
		})
	}
}

func TestRateLimitRetry(t *testing.T) {
	k := &kubelet{pods: testPods(), reject: 4}
	c := dial(t, k.serve(t))
	pods, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 || k.count("List") != 1 {
		t.Errorf("got %d pods from %d List calls after 4 refusals, want 3 from 1", len(pods), k.count("List"))
	}
}

func TestRateLimitRetryBoundedByContext(t *testing.T) {
	k := &kubelet{pods: testPods(), reject: 1 << 30, rejected: make(chan struct{}, 1)}
	c := dial(t, k.serve(t))
	// The deadline passes once kubelet has turned the call away twice,
	// however slowly the machine gets there; the one call that may be
	// under way then finds room in rejected.
	ctx := &expiring{Context: context.Background(), done: make(chan struct{})}
	go func() {
		<-k.rejected
		<-k.rejected
		close(ctx.done)
	}()
	_, err := c.List(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.ResourceExhausted {
		t.Errorf("List under a rate limit that never lets up: error %v, want the deadline and kubelet's refusal", err)
	}
}

// expiring is a context whose deadline passes when done is closed.
type expiring struct {
	context.Context
	done chan struct{}
}

func (e *expiring) Done() <-chan struct{} { return e.done }

func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func TestAllocated(t *testing.T) {
	k := &kubelet{pods: testPods()}
	got, err := dial(t, k.serve(t)).Allocated(context.Background(), "hwnet.io/e810")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]podresources.PodRef{
		"0000:3b:01.3": {Namespace: "ran", Name: "du-0", Container: "proxy"},
		"0000:3b:01.0": {Namespace: "ran", Name: "du-0", Container: "du"},
		"0000:3e:01.1": {Namespace: "ran", Name: "du-0", Container: "du"},
		"0000:3b:01.2": {Namespace: "hpc", Name: "mpi-0", Container: "rank"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Allocated = %v, want %v", got, want)
	}
}

func TestPodDevices(t *testing.T) {
	tests := []struct {
		name, namespace, pod, resource string
		want                           []podresources.ContainerDevices
	}{{
		name: "containers in order, sorted IDs", namespace: "ran", pod: "du-0", resource: "hwnet.io/e810",
		want: []podresources.ContainerDevices{
			{Container: "proxy", IDs: []string{"0000:3b:01.3"}},
			{Container: "du", IDs: []string{"0000:3b:01.0", "0000:3e:01.1"}},
		},
	}, {
		name: "another resource", namespace: "hpc", pod: "mpi-0", resource: "hwnet.io/cx6",
		want: []podresources.ContainerDevices{{Container: "rank", IDs: []string{"0000:41:01.0"}}},
	}, {
		name: "no devices", namespace: "default", pod: "web", resource: "hwnet.io/e810",
	}}
	k := &kubelet{pods: testPods()}
	c := dial(t, k.serve(t))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.PodDevices(context.Background(), tt.namespace, tt.pod, tt.resource)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PodDevices = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDialMissingSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	c, err := podresources.Dial(ctx, socket)
	if err == nil {
		c.Close()
		t.Fatal("Dial succeeded")
	}
	if !strings.Contains(err.Error(), socket) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Dial: error %v, want one naming %s and saying it does not exist", err, socket)
	}
}

func TestDialEmptyPath(t *testing.T) {
	if _, err := podresources.Dial(context.Background(), ""); err == nil || !strings.Contains(err.Error(), "empty path") {
		t.Errorf("Dial(\"\"): error %v, want one about the empty path", err)
	}
}

// TestKubeletRestart stops kubelet and starts it again on the same
// socket: a call made meanwhile waits for it.
func TestKubeletRestart(t *testing.T) {
	k := &kubelet{pods: testPods()}
	path := filepath.Join(t.TempDir(), "kubelet.sock")
	s := k.serveAt(t, path)
	c := dial(t, path)
	if _, err := c.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	restarted := make(chan struct{})
	go func() {
		time.Sleep(100 * time.Millisecond) // the fault: kubelet away for a while, not a wait
		k.serveAt(t, path)
		close(restarted)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.List(ctx); err != nil {
		t.Errorf("List while kubelet restarts: %v", err)
	}
	<-restarted
}
