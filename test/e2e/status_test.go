package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statusEvery is how often statusProbe asks: containerd 2.x asks every
// 5 s, so an agent away for longer than this meets at least one.
const statusEvery = 100 * time.Millisecond

// statusProbe runs the hwnet shim's CNI STATUS in the cluster's
// namespaces as containerd 2.x does for kubelet (hwnet's plugin config
// out of its conflist, on stdin), every statusEvery until stop, which
// returns how many ran and the answers of those that failed.
func (e *env) statusProbe(ctx context.Context, t *testing.T) (stop func() (runs int, failed []string)) {
	t.Helper()
	config := e.pluginConfig(ctx, t)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runs int
	var failed []string
	wg.Go(func() {
		tick := time.NewTicker(statusEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			out, err := e.shimStatus(ctx, config)
			if ctx.Err() != nil {
				return
			}
			runs++
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v: %s", time.Now().Format(time.TimeOnly), err, out))
			}
		}
	})
	return func() (int, []string) {
		cancel()
		wg.Wait()
		return runs, failed
	}
}

// shimStatus runs the shim's STATUS with config once.
func (e *env) shimStatus(ctx context.Context, config []byte) ([]byte, error) {
	cmd := e.c.Command(ctx, "/opt/cni/bin/hwnet")
	cmd.Env = append(cmd.Env, "CNI_COMMAND=STATUS", "CNI_PATH=/opt/cni/bin")
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stdout = bytes.NewReader(config), &stdout
	err := cmd.Run()
	return bytes.TrimSpace(stdout.Bytes()), err
}

// pluginConfig is hwnet's plugin configuration as a runtime hands it to
// the shim: the conflist's hwnet plugin with the list's name and version.
func (e *env) pluginConfig(ctx context.Context, t *testing.T) []byte {
	t.Helper()
	data, err := Exec(ctx, e.c, nil, "cat", ConfFile)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(data, &list); err != nil || len(list.Plugins) == 0 {
		t.Fatalf("%s: %v, %d plugins: %s", ConfFile, err, len(list.Plugins), data)
	}
	plugin := maps.Clone(list.Plugins[0])
	plugin["cniVersion"], plugin["name"] = list.CNIVersion, list.Name
	config, err := json.Marshal(plugin)
	if err != nil {
		t.Fatal(err)
	}
	return config
}

// readySince is when the node's Ready condition last changed.
func (e *env) readySince(ctx context.Context, t *testing.T) time.Time {
	t.Helper()
	node, err := e.client.CoreV1().Nodes().Get(ctx, e.c.NodeName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status != corev1.ConditionTrue {
				t.Fatalf("node %s: Ready=%s: %s", node.Name, c.Status, c.Message)
			}
			return c.LastTransitionTime.Time
		}
	}
	t.Fatalf("node %s has no Ready condition", node.Name)
	return time.Time{}
}

// checkStayedReady fails t if the probe saw STATUS fail or the node's
// Ready condition changed since readySince said since.
func (e *env) checkStayedReady(ctx context.Context, t *testing.T, what string, stop func() (int, []string), since time.Time) {
	t.Helper()
	runs, failed := stop()
	t.Logf("CNI STATUS asked %d times across %s, %d failed", runs, what, len(failed))
	if runs == 0 {
		t.Errorf("CNI STATUS never ran across %s", what)
	}
	if len(failed) > 0 {
		t.Errorf("CNI STATUS failed across %s (the runtime's network, and so the node, NotReady):\n%s", what, strings.Join(failed, "\n"))
	}
	if now := e.readySince(ctx, t); !now.Equal(since) {
		t.Errorf("the node's Ready condition changed at %s across %s (it was Ready since %s)", now, what, since)
	}
}
