package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// How long Up waits for each part; a cold kube-apiserver on a busy 2-core
// machine takes tens of seconds.
const (
	daemonTimeout    = 30 * time.Second
	apiserverTimeout = 120 * time.Second
	nodeReadyTimeout = 120 * time.Second
)

// logTailLines is how much of a log a failed wait quotes.
const logTailLines = 8

// Poll calls check until it succeeds or timeout passes; the error names
// what it waited for, which deadline ended the wait (timeout's or the
// caller's, sooner) and check's last error.
func Poll(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	start := time.Now()
	pollCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	for {
		cerr := check(pollCtx)
		if cerr == nil {
			return nil
		}
		err = lastCheck(pollCtx, err, cerr)
		select {
		case <-pollCtx.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for %s: the caller's context ended after %v of %v: %w", what, time.Since(start).Round(time.Second), timeout, err)
			}
			return fmt.Errorf("waiting for %s: gave up after %v: %w", what, timeout, err)
		case <-time.After(pollInterval):
		}
	}
}

// waitFor calls check until it succeeds or timeout passes, and fails at
// once when p, the process that should make check succeed, exits. The
// error names what it waited for and p's log.
func waitFor(ctx context.Context, what string, p *process, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	for {
		cerr := check(ctx)
		if cerr == nil {
			return nil
		}
		err = lastCheck(ctx, err, cerr)
		if !p.running() {
			return fmt.Errorf("waiting for %s: %s exited (last check: %w); log: %s%s", what, p.Name, err, p.Log, logTail(p.Log))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: gave up after %v (last check: %w); log: %s%s", what, timeout, err, p.Log, logTail(p.Log))
		case <-time.After(pollInterval):
		}
	}
}

// lastCheck is the check's error a failed wait reports: err, this one,
// unless the wait's deadline cut it short and an earlier one (before)
// says what was still missing. A check cut short says only that its
// request ran out of time (an API server's "unexpected error when
// reading response body").
func lastCheck(ctx context.Context, before, err error) error {
	if ctx.Err() == nil || before == nil {
		return err
	}
	return fmt.Errorf("%w (the last check, cut short: %v)", before, err)
}

// logTail returns the last lines of a log, indented, for an error message.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	lines = lines[max(0, len(lines)-logTailLines):]
	return "\n    " + strings.Join(lines, "\n    ")
}

// httpGet fetches url from inside the cluster's network namespace, without
// verifying TLS certificates (health endpoints of self-signed servers),
// and fails unless the status is 200.
func (c *Cluster) httpGet(ctx context.Context, url string) error {
	client := &http.Client{Transport: &http.Transport{
		DialContext:     c.dial,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // health only
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// dialUnix connects to a unix socket in the cluster's mount namespace,
// through the holder's root.
func (c *Cluster) dialUnix(ctx context.Context, path string) error {
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", c.hostPath(path))
	if err != nil {
		return err
	}
	return conn.Close()
}

// hostPath is the host's path of a file in the cluster's mount namespace.
func (c *Cluster) hostPath(path string) string {
	return fmt.Sprintf("/proc/%d/root%s", c.st.Holder.PID, path)
}

func (c *Cluster) apiserverReady(ctx context.Context) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	_, err = client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

// nodeReady succeeds once the node reports Ready with a heartbeat not
// older than since: a restarted kubelet's node keeps its old Ready
// condition for a while.
func (c *Cluster) nodeReady(since time.Time) func(context.Context) error {
	return func(ctx context.Context) error {
		client, err := c.client()
		if err != nil {
			return err
		}
		node, err := client.CoreV1().Nodes().Get(ctx, c.st.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type != corev1.NodeReady {
				continue
			}
			if cond.Status != corev1.ConditionTrue {
				return fmt.Errorf("node %s: Ready is %s: %s", c.st.Name, cond.Status, cond.Message)
			}
			if cond.LastHeartbeatTime.Time.Before(since.Truncate(time.Second)) {
				return fmt.Errorf("node %s: no heartbeat since %v", c.st.Name, since.Format(time.TimeOnly))
			}
			return nil
		}
		return errors.New("node " + c.st.Name + " has no Ready condition yet")
	}
}

// defaultServiceAccount succeeds once kube-controller-manager made the
// default namespace's service account, which pods there need.
func (c *Cluster) defaultServiceAccount(ctx context.Context) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	_, err = client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
	return err
}
