package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Main runs a package's tests with API servers reused between them (see
// Start), and stops those left idle when the tests are done:
//
//	func TestMain(m *testing.M) { kubeapi.Main(m) }
//
// A package's own TestMain calls MainCode instead. Without either, every
// Start launches a server of its own.
func Main(m *testing.M) { os.Exit(MainCode(m)) }

// MainCode is Main for a TestMain of the package's own: it returns the
// exit code.
func MainCode(m *testing.M) int {
	idle.enable()
	code := m.Run()
	if err := idle.close(); err != nil {
		fmt.Fprintln(os.Stderr, "kubeapi:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// pool is the servers a finished test left empty, by their extra
// arguments. A kube-apiserver takes 3-5 s of CPU to start on a 2-core
// machine, and `make test` started 178 of them, 29% of its CPU, their
// etcds 6% more (process accounting, 2026-12-02); an empty one is ready
// at once. It is
// the process's, as its servers are: Main enables it and ends it.
type pool struct {
	mu      sync.Mutex
	enabled bool
	servers map[string][]*Server
}

// idle is the test binary's pool.
var idle pool

func (p *pool) enable() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enabled = true
	p.servers = map[string][]*Server{}
}

func (p *pool) on() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.enabled
}

// take returns an idle server started with args, or nil.
func (p *pool) take(args []string) *Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := poolKey(args)
	list := p.servers[key]
	if len(list) == 0 {
		return nil
	}
	s := list[len(list)-1]
	p.servers[key] = list[:len(list)-1]
	return s
}

func (p *pool) put(s *Server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := poolKey(s.extraArgs)
	p.servers[key] = append(p.servers[key], s)
}

// poolKey is where servers started with args wait.
func poolKey(args []string) string { return strings.Join(args, "\x00") }

// close stops every idle server and removes its directory.
func (p *pool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, list := range p.servers {
		for _, s := range list {
			errs = append(errs, s.discard())
		}
	}
	p.servers, p.enabled = nil, false
	return errors.Join(errs...)
}

// resetTimeout bounds emptying a server for the next test.
const resetTimeout = 30 * time.Second

// release is a pooled server's end of a test: emptied and kept for the
// next, or stopped when the test failed, the server was stopped, or the
// test left what an API server also keeps in memory (reset says what).
func (s *Server) release(t testing.TB) error {
	if t.Failed() || s.stopped {
		return s.discard()
	}
	ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
	defer cancel()
	if err := s.reset(ctx); err != nil {
		if errors.Is(err, errKeepsState) {
			return s.discard()
		}
		return errors.Join(err, s.discard())
	}
	idle.put(s)
	return nil
}

// discard stops the server and removes its directory.
func (s *Server) discard() error {
	return errors.Join(s.shutdown(), os.RemoveAll(s.dir))
}
