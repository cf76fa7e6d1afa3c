package probe

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hwnet-io/hwnet/test/logtest"
)

// TestHandler: /healthz answers while the process serves, /readyz says
// why it is not ready, or ok and its notes, and nothing else is served.
func TestHandler(t *testing.T) {
	notReady := errors.New("pools not registered")
	for _, tt := range []struct {
		name, method, path string
		err                error
		code               int
		body               string
	}{
		{"healthz", "GET", "/healthz", notReady, http.StatusOK, "ok"},
		{"ready", "GET", "/readyz", nil, http.StatusOK, "ok\nnote: pool intel.com/empty has no device\n"},
		{"not ready", "GET", "/readyz", notReady, http.StatusServiceUnavailable, "not ready: pools not registered\n"},
		{"other path", "GET", "/metrics", nil, http.StatusNotFound, ""},
		{"other method", "POST", "/readyz", nil, http.StatusMethodNotAllowed, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := Handler(slog.New(slog.DiscardHandler), func(context.Context) error { return tt.err }, func() []string { return []string{"pool intel.com/empty has no device"} })
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.path, rec.Code, rec.Body, tt.code, tt.body)
			}
		})
	}
}

// TestHandlerLogsChanges: each change of /readyz's answer is logged once,
// with why, so an operator reads in the log why a pod stays unready
// (kubelet's probe event keeps only the status code).
func TestHandlerLogsChanges(t *testing.T) {
	var buf logtest.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime}))
	answers := []error{
		errors.New("pools not registered"), errors.New("pools not registered"),
		errors.New("DRA driver not registered"), nil, nil, errors.New("pools not registered"),
	}
	var next error
	h := Handler(log, func(context.Context) error { return next }, func() []string { return nil })
	for _, err := range answers {
		next = err
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/readyz", nil))
	}
	want := []string{
		`level=INFO msg="not ready" why="pools not registered"`,
		`level=INFO msg="not ready" why="DRA driver not registered"`,
		`level=INFO msg=ready`,
		`level=INFO msg="not ready" why="pools not registered"`,
	}
	if got := buf.Lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TestServeTakenPort: a port already taken fails Serve at once, naming
// the server, rather than a goroutine's log line later.
func TestServeTakenPort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	log := slog.New(slog.DiscardHandler)
	if err := Serve(ctx, &wg, log, "first", "127.0.0.1:0", http.HandlerFunc(OK)); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = Serve(ctx, &wg, log, "probes", ln.Addr().String(), http.HandlerFunc(OK))
	if err == nil || !strings.HasPrefix(err.Error(), "probes: ") {
		t.Errorf("Serve on a taken port: %v, want an error naming the server", err)
	}
	cancel()
	wg.Wait()
}
