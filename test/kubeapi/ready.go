package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const pollInterval = 100 * time.Millisecond

// logTailLines is how much of each server log a failed test shows.
const logTailLines = 40

// waitFor calls check until it succeeds, p exits or ctx ends.
func waitFor(ctx context.Context, p *process, check func(context.Context) error) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		if err := p.exitError(); err != nil {
			return err
		}
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %w); log: %s", p.name, ctx.Err(), err, p.logPath)
		case <-ticker.C:
		}
	}
}

func waitEtcd(ctx context.Context, etcd *process, clientURL string) error {
	return waitFor(ctx, etcd, func(ctx context.Context) error {
		return etcdHealthy(ctx, clientURL)
	})
}

func etcdHealthy(ctx context.Context, clientURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
	if err != nil {
		return fmt.Errorf("etcd health request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("etcd health: %w", err)
	}
	defer resp.Body.Close()
	var health struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&health); err != nil {
		return fmt.Errorf("etcd health answer: %w", err)
	}
	if health.Health != "true" {
		return fmt.Errorf("etcd health is %q", health.Health)
	}
	return nil
}

// waitReady waits until kube-apiserver's /readyz answers ok, which it does
// only once its post-start hooks ran (CRD informers, RBAC bootstrap
// policy, priority classes).
func (s *Server) waitReady(ctx context.Context) error {
	return waitFor(ctx, s.apiserver, func(ctx context.Context) error {
		body, err := s.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("readyz: %w", err)
		}
		if string(body) != "ok" {
			return fmt.Errorf("readyz answered %q", body)
		}
		return nil
	})
}

// logTails prints the last lines of each server's log.
func (s *Server) logTails(t testing.TB) {
	t.Helper()
	for _, name := range []string{"etcd.log", "kube-apiserver.log"} {
		path := filepath.Join(s.dir, name)
		lines, err := lastLines(path, logTailLines)
		if err != nil {
			t.Logf("kubeapi: %v", err)
			continue
		}
		t.Logf("kubeapi: last %d lines of %s:\n%s", len(lines), path, strings.Join(lines, "\n"))
	}
}

func lastLines(path string, n int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read server log: %w", err)
	}
	defer f.Close()
	var lines []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		lines = append(lines, scanner.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("read server log %s: %w", path, err)
	}
	return lines, nil
}
