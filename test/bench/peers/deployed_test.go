package peers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// asDeployed is the command line that starts hwnet-agent's binary with
// the runtime settings (GOGC, GOMEMLIMIT, HTTP2_READ_IDLE_TIMEOUT_SECONDS)
// deploy/hwnet-agent.yaml gives it, so that its memory and idle CPU are
// measured as the DaemonSet runs it; -agent-env adds to them, to try
// others, and -agent-args gives the binary flags of its own before the
// benchmark's (e.g. --pace-gc=false).
func asDeployed(tb testing.TB, binary string) []string {
	data, err := os.ReadFile("../../../deploy/hwnet-agent.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	objs, err := kubeapi.DecodeObjects(data)
	if err != nil {
		tb.Fatalf("deploy/hwnet-agent.yaml: %v", err)
	}
	args := []string{"/usr/bin/env"}
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			tb.Fatalf("deploy/hwnet-agent.yaml: %v", err)
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if c.Name == "hwnet-agent" && runtimeSetting(e.Name) && e.Value != "" {
					args = append(args, e.Name+"="+e.Value)
				}
			}
		}
	}
	if *agentEnv != "" {
		args = append(args, strings.Split(*agentEnv, ",")...)
	}
	args = append(args, binary)
	if *agentArgs != "" {
		args = append(args, strings.Split(*agentArgs, ",")...)
	}
	return args
}

// runtimeSetting says whether a DaemonSet variable is one of the Go
// runtime's (GOGC, GOMEMLIMIT) or client-go's HTTP/2 health check's,
// which the benchmark's agent runs with as deployed.
func runtimeSetting(name string) bool {
	return strings.HasPrefix(name, "GO") || strings.HasPrefix(name, "HTTP2_")
}

// installAPIs makes the API server serve what `kubectl apply -k deploy`
// installs for the agent to read: every CRD in deploy/crds and the
// VFSettingsPolicy object. Without them the agent's informers of
// PodNetworks and of the policy are not what a node runs: the policy's
// would list, fail and list again every 30-60 s of an idle window.
func installAPIs(tb testing.TB, api *kubeapi.Server) {
	tb.Helper()
	crds, err := filepath.Glob("../../../deploy/crds/*.yaml")
	if err != nil || len(crds) == 0 {
		tb.Fatalf("deploy/crds: %d CRDs (%v)", len(crds), err)
	}
	for _, crd := range crds {
		api.ApplyCRD(tb, crd)
	}
	api.ApplyFile(tb, "../../../deploy/hwnet-vf-settings-policy.yaml")
}
