package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestHwnetctlDoctorInTheAgentPod: hwnetctl doctor, run in the agent pod
// with only the pool config given, reads what the deployment mounts:
// kubelet's PodResources socket answers, hwnet's CNI configuration is the
// one the runtime uses, the CDI directory is there and every driver the
// pools select is loaded, so it finds no error on the demo's node; its
// exit status says its worst finding.
func TestHwnetctlDoctorInTheAgentPod(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	agent, err := e.agentPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "exec", agent.Name, "--",
		"hwnetctl", "doctor", "--config", agentConfigFile, "-o", "json")
	var report struct {
		Findings []struct{ Severity, Check, Subject, Message, Fix string }
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("hwnetctl doctor -o json: %v (%v): %s", jerr, err, out)
	}
	t.Logf("hwnetctl doctor in %s: %+v", agent.Name, report.Findings)
	worst := ""
	for _, f := range report.Findings {
		if f.Severity == "error" {
			t.Errorf("doctor found an error on the demo's node: %+v", f)
		}
		if f.Check == "kubelet" || f.Check == "cni" || f.Check == "cdi" || f.Check == "driver" {
			t.Errorf("the deployment's mounts or the node's drivers fall short: %+v", f)
		}
		if worst != "error" && (f.Severity == "error" || f.Severity == "warning") {
			worst = f.Severity
		}
	}
	switch {
	case worst == "" && err != nil:
		t.Errorf("doctor found nothing worse than notes but failed: %v", err)
	case worst == "warning" && (err == nil || !strings.Contains(err.Error(), "exit code 3")):
		t.Errorf("doctor found warnings; exit: %v, want exit code 3", err)
	}
}
