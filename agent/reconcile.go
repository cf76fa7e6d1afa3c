package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/delegate"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// Defaults of the agent's own garbage collection of attachments.
const (
	DefaultCRISocket         = "/run/containerd/containerd.sock"
	DefaultReconcileInterval = time.Minute
	// reconcileGrace spares a record whose ADD finished this recently: the
	// runtime lists a sandbox only once its network is set up.
	reconcileGrace = time.Minute
	criTimeout     = 10 * time.Second
)

// liveSandboxes asks the container runtime, through the CRI, which pod
// sandboxes exist, ready or not.
func liveSandboxes(ctx context.Context, socket string) (map[string]bool, error) {
	if _, err := os.Stat(socket); err != nil {
		return nil, fmt.Errorf("CRI socket: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("CRI %s: %w", socket, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, criTimeout)
	defer cancel()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI %s: ListPodSandbox: %w", socket, err)
	}
	live := make(map[string]bool, len(resp.Items))
	for _, s := range resp.Items {
		live[s.Id] = true
	}
	return live, nil
}

// reconcileLoop tears down, every interval, the attachments of sandboxes the
// runtime no longer has (delegate.Reconcile), so no failed or interrupted
// sandbox leaks a record, device-info files, IP leases or a VF, whatever
// the runtime does.
func (a *Agent) reconcileLoop(ctx context.Context, d *delegate.Delegator, o CNIOptions) {
	if o.CRISocket == "" || o.ReconcileInterval <= 0 {
		return
	}
	t := time.NewTicker(o.ReconcileInterval)
	defer t.Stop()
	for {
		if err := a.reconcileOnce(ctx, d, o); err != nil {
			a.log.Warn("reconcile of attachments skipped", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Agent) reconcileOnce(ctx context.Context, d *delegate.Delegator, o CNIOptions) error {
	conf, err := ownPluginConf(filepath.Join(cmp.Or(o.OutputDir, o.ConfDir), o.ConfFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil // not written yet: no attachment can exist
	}
	if err != nil {
		return err
	}
	live, err := liveSandboxes(ctx, o.CRISocket)
	if err != nil {
		return err
	}
	collected, err := d.Reconcile(ctx, conf, o.BinDir, live, reconcileGrace)
	if len(collected) > 0 {
		a.log.Info("tore down the attachments of sandboxes the runtime no longer has", "containers", collected)
	}
	return err
}

// ownPluginConf is hwnet's plugin configuration in its configuration list,
// with the list's name and version, as the runtime passes it.
func ownPluginConf(path string) ([]byte, error) {
	list, err := netconf.LoadFile(path)
	if err != nil {
		return nil, err
	}
	conf, err := chain.PluginConfig(list, list.Plugins[0], nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return conf, nil
}
