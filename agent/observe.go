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
	"github.com/hwnet-io/hwnet/internal/probe"
)

// serveObservability starts the probe and metrics servers the options ask
// for; they stop with ctx.
func (a *Agent) serveObservability(ctx context.Context, wg *sync.WaitGroup) error {
	if a.opts.ProbeAddr != "" {
		if err := probe.Serve(ctx, wg, a.log, "probes", a.opts.ProbeAddr, probe.Handler(a.notReady)); err != nil {
			return err
		}
	}
	if a.opts.MetricsAddr != "" {
		return probe.Serve(ctx, wg, a.log, "metrics", a.opts.MetricsAddr, a.metrics.Handler(a.opts.Pprof))
	}
	return nil
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

// probeTimeout bounds the readiness probe's request to the CNI socket;
// kubelet's own probe timeout is a second by default.
const probeTimeout = 800 * time.Millisecond

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
