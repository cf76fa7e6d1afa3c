package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hwnet-io/hwnet/controller"
)

// newController builds the controller on clients of cfg. Custom resources
// (PodNetworks, attachments, NADs) have no protobuf form: their clients
// speak JSON.
func newController(cfg *rest.Config, kc kubernetes.Interface, o options) (*controller.Controller, error) {
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.AcceptContentTypes, jsonCfg.ContentType = "application/json", "application/json"
	dyn, err := dynamic.NewForConfig(jsonCfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	nads, err := nadclient.NewForConfig(jsonCfg)
	if err != nil {
		return nil, fmt.Errorf("NetworkAttachmentDefinition client: %w", err)
	}
	return controller.New(controller.Options{Kube: kc, Dynamic: dyn, NADs: nads, CreateDefault: !o.disableDefault,
		AllowedNamespaces: o.allowed, Logger: o.logger})
}

// serveProbes answers /healthz and /readyz while the process runs: a
// replica waiting for the lease is as ready as the leader.
func serveProbes(ctx context.Context, addr string, logger *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("probes: %w", err)
	}
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }
	mux.HandleFunc("GET /healthz", ok)
	mux.HandleFunc("GET /readyz", ok)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("probe server stopped", "err", err)
		}
	}()
	logger.Info("serving probes", "addr", ln.Addr().String())
	return nil
}
