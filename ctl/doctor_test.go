package ctl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// cniDir returns a CNI configuration directory holding files, each with a
// minimal valid configuration list.
func cniDir(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		conf := `{"cniVersion":"1.0.0","name":"` + strings.TrimSuffix(f, filepath.Ext(f)) + `","plugins":[{"type":"bridge"}]}`
		if err := os.WriteFile(filepath.Join(dir, f), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// stdinFrom makes os.Stdin read data until the test ends.
func stdinFrom(t *testing.T, data string) {
	t.Helper()
	f, err := os.Open(writeConfig(t, "stdin", data))
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdin
	os.Stdin = f
	t.Cleanup(func() { os.Stdin = saved; f.Close() })
}

// TestDoctor runs hwnetctl doctor on the default virtual node: what it
// says, in which format, and the exit status a script reads.
func TestDoctor(t *testing.T) {
	node := treeNode(t)
	netdev := writeConfig(t, "netdev.yaml", `resourceList: [{resourceName: netdev, selectors: {drivers: [iavf]}}]`)
	dpdk := writeConfig(t, "dpdk.yaml", `resourceList: [{resourceName: dpdk, selectors: {drivers: [igb_uio]}}]`)
	invalid := writeConfig(t, "invalid.yaml", `resourceList: [{resourceName: dpdk, selectors: {drivers: 7}}]`)
	hwnetFirst := cniDir(t, "00-hwnet.conflist", "10-calico.conflist")
	args := func(config, cni string, more ...string) []string {
		return append([]string{"doctor", "--sysfs", node.SysRoot(), "--dev", node.DevRoot(), "--config", config,
			"--kubelet-config", "", "--pod-resources-socket", "", "--cni-conf-dir", cni}, more...)
	}
	tests := []struct {
		name      string
		args      []string
		code      int
		stdin     string // standard input, for --config -
		stdout    []string
		stderr    string
		findings  int // in -o json; -1 when not json
		worstJSON string
	}{
		{name: "ready", args: args(netdev, hwnetFirst), stdout: []string{"nothing found"}, findings: -1},
		{name: "a pool's driver not loaded", args: args(dpdk, hwnetFirst), code: 4, findings: -1,
			stdout: []string{"error", "pool intel.com/dpdk", "needs the igb_uio driver, which is not loaded", "fix: modprobe igb_uio"}},
		{name: "as JSON", args: args(dpdk, hwnetFirst, "-o", "json"), code: 4, findings: 2, worstJSON: "error"},
		{name: "the runtime's first config is not hwnet's", args: args(netdev, cniDir(t, "00-hwnet.conflist", "00-aaa.conflist")), code: 3, findings: -1,
			stdout: []string{"warning", "the runtime uses 00-aaa.conflist, which sorts before hwnet's 00-hwnet.conflist"}},
		{name: "no CNI configuration", args: args(netdev, t.TempDir()), code: 4, findings: -1, stdout: []string{"no CNI configuration"}},
		{name: "hwnet's CNI configuration not written", args: args(netdev, cniDir(t, "10-calico.conflist")), findings: -1,
			stdout: []string{"info", "the runtime uses 10-calico.conflist; hwnet's 00-hwnet.conflist is not there"}},
		{name: "the config on standard input", args: args("-", hwnetFirst), stdin: `resourceList: [{resourceName: dpdk, selectors: {drivers: [igb_uio]}}]`,
			code: 4, findings: -1, stdout: []string{"pool intel.com/dpdk", "needs the igb_uio driver"}},
		{name: "a config over 1 MiB on standard input", args: args("-", hwnetFirst), stdin: strings.Repeat(" ", 1<<20+1),
			code: 1, findings: -1, stderr: "--config: - is larger than 1048576 bytes"},
		{name: "an invalid config", args: args(invalid, hwnetFirst), code: 1, findings: -1, stderr: "drivers"},
		{name: "an unknown format", args: args(netdev, hwnetFirst, "-o", "yaml"), code: 2, findings: -1, stderr: `-o: unknown output format "yaml"`},
		{name: "an argument", args: args(netdev, hwnetFirst, "extra"), code: 2, findings: -1, stderr: `unexpected argument "extra"`},
		{name: "help", args: []string{"doctor", "-h"}, findings: -1, stderr: "Exit status: 0 nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.stdin != "" {
				stdinFrom(t, tt.stdin)
			}
			code, out, errOut := run(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tt.code, out, errOut)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("output does not say %q:\n%s", s, out)
				}
			}
			if !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q, want it to contain %q", errOut, tt.stderr)
			}
			if tt.findings < 0 {
				return
			}
			var report struct {
				Findings []struct{ Severity, Check, Subject, Message, Fix string }
			}
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatalf("-o json: %v\n%s", err, out)
			}
			if len(report.Findings) != tt.findings || report.Findings[0].Severity != tt.worstJSON {
				t.Errorf("-o json: %+v, want %d findings, %s first", report.Findings, tt.findings, tt.worstJSON)
			}
		})
	}
}

// TestDoctorNamesBoth: on a virtual node with a PF whose firmware has
// SR-IOV off, and a pool whose driver is not loaded, doctor names both,
// each with its fix.
func TestDoctorNamesBoth(t *testing.T) {
	spec := &virtualnode.Spec{Name: "doctor-both", PFs: []virtualnode.PFSpec{
		{Model: "E810-C", VFs: 4, Names: []string{"ens1f0"}},
		{Model: "E810-C", SRIOVOff: true, Names: []string{"ens2f0"}},
	}}
	node := vnodetest.BuildForTest(t, spec, vnodetest.OpenDB(t), false)
	config := writeConfig(t, "pools.yaml", `resourceList: [{resourceName: dpdk, selectors: {drivers: [vfio-pci]}}]`)
	code, out, errOut := run(t, "doctor", "--sysfs", node.SysRoot(), "--dev", node.DevRoot(), "--config", config,
		"--kubelet-config", "", "--pod-resources-socket", "", "--cni-conf-dir", "")
	if code != 4 {
		t.Fatalf("exit %d, want 4 (errors)\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"pool intel.com/dpdk  needs the vfio-pci driver, which is not loaded",
		"fix: modprobe vfio_pci",
		"PF 0000:3e:00.0 (ens2f0)  SR-IOV is disabled in the NIC's firmware (sriov_totalvfs is 0)",
		"fix: enable SR-IOV in the NIC's firmware",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("doctor does not say %q:\n%s", want, out)
		}
	}
}
