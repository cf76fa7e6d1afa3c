package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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
		Findings []doctorFinding
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

// doctorFinding is one finding of hwnetctl doctor -o json.
type doctorFinding struct{ Severity, Check, Subject, Message, Fix string }

// firmwareOffPF is the e2e node's PF whose firmware has SR-IOV off.
const firmwareOffPF = "ens9f0"

// TestHwnetctlDoctorNamesWhatKeepsAPoolEmpty: given, on its standard
// input, a pool whose VFs need a driver the node has not loaded, hwnetctl
// doctor in the agent pod names the pool and the driver, and the PF whose
// firmware has SR-IOV off, each with its fix, and exits 4 (errors).
func TestHwnetctlDoctorNamesWhatKeepsAPoolEmpty(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	config := []byte("resourceList: [{resourceName: uio, selectors: {drivers: [uio_pci_generic]}}]\n")
	out, err := e.hwnetctl(ctx, t, config, "doctor", "--config", "-", "-o", "json")
	if err == nil || !strings.Contains(err.Error(), "exit code 4") {
		t.Errorf("hwnetctl doctor: %v, want exit code 4 (errors)", err)
	}
	var report struct {
		Findings []doctorFinding
	}
	if jerr := json.Unmarshal([]byte(out), &report); jerr != nil {
		t.Fatalf("hwnetctl doctor -o json: %v (%v): %s", jerr, err, out)
	}
	wants := []struct{ severity, check, subject, message, fix string }{
		{"error", "driver", "pool intel.com/uio", "needs the uio_pci_generic driver, which is not loaded", "modprobe uio_pci_generic"},
		{"warning", "sriov", "(" + firmwareOffPF + ")", "SR-IOV is disabled in the NIC's firmware", "enable SR-IOV in the NIC's firmware"},
	}
	for _, w := range wants {
		if !slices.ContainsFunc(report.Findings, func(f doctorFinding) bool {
			return f.Severity == w.severity && f.Check == w.check && strings.Contains(f.Subject, w.subject) &&
				strings.Contains(f.Message, w.message) && strings.Contains(f.Fix, w.fix)
		}) {
			t.Errorf("doctor does not name %+v: %+v", w, report.Findings)
		}
	}
}

// TestHwnetctlCaptureInTheAgentPod: hwnetctl capture, in the agent pod,
// takes the node's NICs as the pod sees them; unpacked there, and drawn
// as a virtual node, the capture lists the same PFs, VFs and NICs to
// hwnetctl inventory as the node does.
func TestHwnetctlCaptureInTheAgentPod(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	// The pod's /tmp is an emptyDir of its own, gone with the pod; the
	// image has no rm, so each run takes a name of its own.
	name := fmt.Sprintf("/tmp/e2e-capture-%d", time.Now().UnixNano())
	for _, args := range [][]string{
		{"capture", "take", "-o", name + ".json"},
		{"capture", "unpack", "--dir", name, name + ".json"},
		{"virtual-node", "create", "--no-links", "--capture", name + ".json", "--dir", name + "-vn"},
	} {
		if out, err := e.hwnetctl(ctx, t, nil, args...); err != nil {
			t.Fatalf("hwnetctl %q: %v\n%s", args, err, out)
		}
	}
	functions := func(args ...string) []string {
		out, err := e.hwnetctl(ctx, t, nil, append([]string{"inventory", "-o", "json"}, args...)...)
		if err != nil {
			t.Fatalf("hwnetctl inventory %q: %v", args, err)
		}
		var inv struct {
			PFs []struct {
				PCIAddress string
				VFs        []struct{ PCIAddress, Driver string }
			}
			NICs []struct{ PCIAddress string }
		}
		if err := json.Unmarshal([]byte(out), &inv); err != nil {
			t.Fatalf("hwnetctl inventory %q: %v", args, err)
		}
		var ids []string
		for _, pf := range inv.PFs {
			ids = append(ids, "PF "+pf.PCIAddress)
			for _, vf := range pf.VFs {
				ids = append(ids, "VF "+vf.PCIAddress+" "+vf.Driver)
			}
		}
		for _, nic := range inv.NICs {
			ids = append(ids, "NIC "+nic.PCIAddress)
		}
		return ids
	}
	want := functions()
	if got := functions("--sysfs", name+"/sys", "--dev", name+"/dev"); !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("the capture lists %q, want the node's %q", got, want)
	}
	if got := functions("--sysfs", name+"-vn/sys", "--dev", name+"-vn/dev"); !slices.Equal(got, want) {
		t.Errorf("the virtual node of the capture lists %q, want the node's %q", got, want)
	}
	if out, err := e.hwnetctl(ctx, t, nil, "virtual-node", "destroy", "--dir", name+"-vn"); err != nil {
		t.Errorf("hwnetctl virtual-node destroy: %v\n%s", err, out)
	}
}
