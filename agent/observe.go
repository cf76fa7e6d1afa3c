package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/deviceplugin"
	"github.com/hwnet-io/hwnet/internal/metrics"
)

// probeTimeout bounds the readiness probe's request to the CNI socket;
// kubelet's own probe timeout is a second by default.
const probeTimeout = 800 * time.Millisecond

// serveObservability starts the probe and metrics servers the options ask
// for; they stop with ctx.
func (a *Agent) serveObservability(ctx context.Context, wg *sync.WaitGroup) error {
	if a.opts.ProbeAddr != "" {
		if err := a.serveHTTP(ctx, wg, "probes", a.opts.ProbeAddr, a.probeHandler()); err != nil {
			return err
		}
	}
	if a.opts.MetricsAddr != "" {
		return a.serveHTTP(ctx, wg, "metrics", a.opts.MetricsAddr, a.metrics.Handler(a.opts.Pprof))
	}
	return nil
}

// serveHTTP listens on addr at once, so a taken port fails the start, and
// serves h until ctx ends.
func (a *Agent) serveHTTP(ctx context.Context, wg *sync.WaitGroup, what, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	wg.Go(func() {
		<-ctx.Done()
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		srv.Shutdown(stop)
	})
	wg.Go(func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("HTTP server stopped", "server", what, "err", err)
		}
	})
	a.log.Info("serving HTTP", "server", what, "addr", ln.Addr().String())
	return nil
}

// probeHandler serves /healthz, which answers while the process serves
// HTTP, and /readyz, which says why the agent is not ready yet.
func (a *Agent) probeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := a.notReady(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// notReady is nil once every pool is registered with kubelet and, when
// the agent serves CNI, its socket answers; else it says what is missing.
func (a *Agent) notReady(ctx context.Context) error {
	if r := a.rejected.Load(); r != nil {
		return fmt.Errorf("pool configuration %s rejected, serving the last good one: %s", a.opts.ConfigFile, *r)
	}
	plugins := a.plugins.Load()
	if plugins == nil {
		return errors.New("the first discovery has not finished")
	}
	var waiting []string
	for _, p := range *plugins {
		if !p.Registered() {
			waiting = append(waiting, p.ResourceName())
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("pools not registered with kubelet: %s", strings.Join(waiting, ", "))
	}
	if a.opts.CNI == nil {
		return nil
	}
	return cniAnswers(ctx, a.opts.CNI.withDefaults().SocketPath)
}

// cniAnswers sends the CNI socket a request it refuses: any HTTP answer
// shows the server reads requests, which a socket file alone does not.
func cniAnswers(ctx context.Context, socket string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://hwnet-agent"+wire.Path, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("CNI socket %s: %w", socket, err)
	}
	resp.Body.Close()
	return nil
}

// storePlugins publishes the serving plugins to the readiness probe.
func (a *Agent) storePlugins() {
	list := make([]*deviceplugin.Plugin, 0, len(a.pools))
	for _, run := range a.pools {
		list = append(list, run.plugin)
	}
	a.plugins.Store(&list)
}

// measuredHandler records each CNI request's latency and result.
type measuredHandler struct {
	next    server.Handler
	metrics *metrics.Metrics
}

func (h measuredHandler) Handle(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
	start := time.Now()
	res, err := h.next.Handle(ctx, req)
	h.metrics.ObserveCNI(req.Command, time.Since(start), err)
	return res, err
}
