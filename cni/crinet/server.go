package crinet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/cni/pluginexec"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
)

// FallbackSource finds the runtime's on-disk default configuration: its
// file and its parsed list (readiness.Writer.Default).
type FallbackSource func() (string, *netconf.Delegate, error)

// Options configure a Server.
type Options struct {
	Store *Store
	// Records are hwnet's attachment records (the CNI cache directory),
	// which say which pods use which network.
	Records *attachments.Store
	// Fallback finds the runtime's default configuration.
	Fallback FallbackSource
	// Exec runs plugins for STATUS; nil runs them as processes that die
	// with the caller (package pluginexec).
	Exec invoke.Exec
	// StatusTimeout bounds each network's STATUS.
	StatusTimeout time.Duration
	Logger        *slog.Logger
	// Access says who may connect to the socket; the zero Access: root.
	Access nodesocket.Access
}

// Server implements the CRI network API's RuntimeService.
type Server struct {
	crinetapi.UnimplementedRuntimeServiceServer
	opts Options
}

// NewServer returns a Server; Serve puts it on a socket.
func NewServer(o Options) *Server {
	if o.StatusTimeout <= 0 {
		o.StatusTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Exec == nil {
		o.Exec = pluginexec.New(os.Stderr)
	}
	return &Server{opts: o}
}

// SetPodNetwork implements RuntimeService.
func (s *Server) SetPodNetwork(ctx context.Context, req *crinetapi.SetPodNetworkRequest) (*crinetapi.SetPodNetworkResponse, error) {
	n, err := s.opts.Store.Set(req.GetConfig())
	if err != nil {
		return nil, s.grpcError("SetPodNetwork", err)
	}
	s.opts.Logger.Info("CRI network set", "network", n.Key.String(), "generation", n.Config.GetMetadata().GetGeneration())
	return &crinetapi.SetPodNetworkResponse{Config: n.Config}, nil
}

// RemovePodNetwork implements RuntimeService.
func (s *Server) RemovePodNetwork(ctx context.Context, req *crinetapi.RemovePodNetworkRequest) (*crinetapi.RemovePodNetworkResponse, error) {
	err := s.opts.Store.Remove(req.GetMetadata(), s.podsOn)
	if err != nil {
		return nil, s.grpcError("RemovePodNetwork", err)
	}
	s.opts.Logger.Info("CRI network removed", "namespace", req.GetMetadata().GetNamespace(), "name", req.GetMetadata().GetName())
	return &crinetapi.RemovePodNetworkResponse{}, nil
}

// podsOn names the pods attached to a managed network.
func (s *Server) podsOn(k Key) ([]string, error) {
	byNet, err := attachmentsByNetwork(s.opts.Records)
	return podNames(byNet[k.String()]), err
}

// grpcError gives an error its status code.
func (s *Server) grpcError(call string, err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, ErrStale):
		code = codes.Aborted
	case errors.Is(err, ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, ErrReadOnly):
		code = codes.PermissionDenied
	case errors.Is(err, ErrInUse):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrTooMuch):
		code = codes.ResourceExhausted
	}
	s.opts.Logger.Warn("CRI network request refused", "call", call, "code", code.String(), "err", err)
	return grpcstatus.Error(code, err.Error())
}

// ListPodNetwork implements RuntimeService: _fallback first, then every
// managed network by namespace and name, each with its status and pods.
func (s *Server) ListPodNetwork(ctx context.Context, _ *crinetapi.ListPodNetworkRequest) (*crinetapi.ListPodNetworkResponse, error) {
	byNet, err := attachmentsByNetwork(s.opts.Records)
	if err != nil {
		s.opts.Logger.Warn("CRI network list: attachment records", "err", err)
	}
	resp := &crinetapi.ListPodNetworkResponse{Networks: []*crinetapi.PodNetworkResponse{s.fallback(ctx, byNet[fallbackNetwork])}}
	for _, n := range s.opts.Store.List() {
		resp.Networks = append(resp.Networks, &crinetapi.PodNetworkResponse{
			Config: n.Config,
			Status: s.status(ctx, n.Key.String(), n.ConfList),
			Pods:   byNet[n.Key.String()],
		})
	}
	return resp, nil
}

// fallback is _fallback's entry: the runtime's default configuration.
func (s *Server) fallback(ctx context.Context, pods []*crinetapi.PodAttachment) *crinetapi.PodNetworkResponse {
	r := &crinetapi.PodNetworkResponse{Pods: pods}
	if s.opts.Fallback == nil {
		r.Config = fallbackConfig(nil)
		r.Status = &crinetapi.NetworkStatus{Reason: "no default configuration source"}
		return r
	}
	_, dl, err := s.opts.Fallback()
	r.Config = fallbackConfig(dl)
	if err != nil {
		r.Status = &crinetapi.NetworkStatus{Reason: err.Error()}
		return r
	}
	data, err := dl.Bytes()
	if err != nil {
		r.Status = &crinetapi.NetworkStatus{Reason: err.Error()}
		return r
	}
	r.Status = s.status(ctx, FallbackName, data)
	return r
}

// status is a network's NetworkStatus: sandbox_management when its list
// is valid and every plugin installed, connectivity when its plugins'
// STATUS (CNI 1.1) succeeds; lists older than 1.1.0 have no STATUS, which
// counts as success, as libcni has it.
func (s *Server) status(ctx context.Context, name string, confList []byte) *crinetapi.NetworkStatus {
	st := &crinetapi.NetworkStatus{}
	dl, err := netconf.Parse(confList, "", name)
	if err != nil {
		st.Reason = fmt.Sprintf("configuration: %v", err)
		return st
	}
	if err := s.opts.Store.validator.checkInstalled(dl); err != nil {
		st.Reason = err.Error()
		return st
	}
	st.SandboxManagement = true
	ctx, cancel := context.WithTimeout(ctx, s.opts.StatusTimeout)
	defer cancel()
	engine := chain.New(s.opts.Exec, s.opts.Store.validator.BinDirs, os.Environ())
	if err := engine.Status(ctx, dl); err != nil {
		st.Reason = fmt.Sprintf("STATUS: %v", err)
		return st
	}
	st.Connectivity = true
	return st
}
