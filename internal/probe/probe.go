// Package probe serves a binary's HTTP endpoints: kubelet's liveness and
// readiness probes, and whatever else (metrics) shares their lifecycle.
// The binary says what ready means; this package only answers for it.
package probe

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// shutdownTimeout bounds how long in-flight requests may finish once the
// server stops: probes and scrapes are short.
const shutdownTimeout = time.Second

// Serve listens on addr at once, so a taken port fails the start, and
// serves h until ctx ends; what names the server in logs and errors.
func Serve(ctx context.Context, wg *sync.WaitGroup, log *slog.Logger, what, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	wg.Go(func() {
		<-ctx.Done()
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		srv.Shutdown(stop)
	})
	wg.Go(func() {
		if err := srv.Serve(ln); err != http.ErrServerClosed { // Serve returns it as is
			log.Error("HTTP server stopped", "server", what, "err", err)
		}
	})
	log.Info("serving HTTP", "server", what, "addr", ln.Addr().String())
	return nil
}

// Handler serves /healthz, which answers while the process serves HTTP,
// and /readyz, which answers ok when notReady returns nil, followed by
// notes (a line each: what a ready process still wants looked at), and
// otherwise says why the process is not ready yet. Each change of that
// answer is logged, since kubelet's probe event keeps only the status
// code and an operator asks the log why a pod stays unready.
func Handler(log *slog.Logger, notReady func(context.Context) error, notes func() []string) http.Handler {
	changes := &readiness{log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", OK)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		err := notReady(r.Context())
		changes.saw(err)
		if err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
		for _, n := range notes() {
			fmt.Fprintln(w, "note: "+n)
		}
	})
	return mux
}

// readiness remembers the last answer /readyz gave, to log only changes.
type readiness struct {
	log  *slog.Logger
	mu   sync.Mutex
	seen bool
	last string
}

func (r *readiness) saw(err error) {
	why := ""
	if err != nil {
		why = err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen && why == r.last {
		return
	}
	r.seen, r.last = true, why
	if err != nil {
		r.log.Info("not ready", "why", why)
		return
	}
	r.log.Info("ready")
}

// OK answers ok to every request: a process whose work is done and that
// only stays up to be seen ready (hwnet-agent --uninstall).
func OK(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }
