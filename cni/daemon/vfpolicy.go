package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hwnet-io/hwnet/api/vfpolicy"
	"github.com/hwnet-io/hwnet/cni/vfpolicywatch"
)

// WatchVFPolicy starts following the VFSettingsPolicy and the namespaces'
// labels until ctx ends, and returns what judges claims' and NADs' VF
// settings with them: the DRA driver's and the CNI side's one copy
// (Deps.VFPolicy). Until the first list it refuses every setting.
func WatchVFPolicy(ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, client kubernetes.Interface, log *slog.Logger) (vfpolicy.Checker, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("VFSettingsPolicy: %w", err)
	}
	w := vfpolicywatch.New(client, dyn, log)
	wg.Go(func() {
		if err := w.Run(ctx); err != nil {
			log.Error("VFSettingsPolicy: every VF setting of claims and NetworkAttachmentDefinitions is refused", "err", err)
		}
	})
	return w, nil
}
