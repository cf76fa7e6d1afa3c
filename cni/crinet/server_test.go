package crinet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/crinet"
	"github.com/hwnet-io/hwnet/test/cniplugins"
)

func TestCRINet_SetPodNetwork_ValidationErrorsNameFieldAndValue(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name   string
		change func(c *crinetapi.NetworkConfig)
		want   string
	}{
		{"no config", func(c *crinetapi.NetworkConfig) { proto.Reset(c); c.Metadata = nil }, "config.metadata: missing"},
		{"no name", func(c *crinetapi.NetworkConfig) { c.Metadata.Name = "" }, `config.metadata.name: "": empty`},
		{"bad name", func(c *crinetapi.NetworkConfig) { c.Metadata.Name = "Sriov_A" }, `config.metadata.name: "Sriov_A": not a DNS-1123 label`},
		{"long name", func(c *crinetapi.NetworkConfig) { c.Metadata.Name = strings.Repeat("a", 64) }, "64 characters"},
		{"bad namespace", func(c *crinetapi.NetworkConfig) { c.Metadata.Namespace = "-cnf" }, `config.metadata.namespace: "-cnf"`},
		{"bad resource", func(c *crinetapi.NetworkConfig) { c.Metadata.Annotations["k8s.v1.cni.cncf.io/resourceName"] = "sriov" },
			`config.metadata.annotations[k8s.v1.cni.cncf.io/resourceName]: "sriov"`},
		{"network type", func(c *crinetapi.NetworkConfig) { c.NetworkType = 7 }, "config.network_type: 7: only CNIv1"},
		{"no cniv1 config", func(c *crinetapi.NetworkConfig) { c.Cniv1Config = nil }, "config.cniv1_config: missing"},
		{"no cni version", func(c *crinetapi.NetworkConfig) { c.Cniv1Config.CniVersion = "" }, "config.cniv1_config.cni_version: empty"},
		{"bad cni version", func(c *crinetapi.NetworkConfig) { c.Cniv1Config.CniVersion = "9.9.9" }, `cniVersion: "9.9.9" is not supported`},
		{"no plugins", func(c *crinetapi.NetworkConfig) { c.Cniv1Config.Plugins = nil }, "config.cniv1_config.plugins: empty"},
		{"no type", func(c *crinetapi.NetworkConfig) { c.Cniv1Config.Plugins[0].Type = "" }, "config.cniv1_config.plugins[0].type: empty"},
		{"type is a path", func(c *crinetapi.NetworkConfig) { c.Cniv1Config.Plugins[0].Type = "../bin/sh" }, `type: "../bin/sh" is a path`},
		{"plugin not installed", func(c *crinetapi.NetworkConfig) { c.Cniv1Config.Plugins[0].Type = "sriov" },
			`config.cniv1_config.plugins[0].type: "sriov": no such plugin installed in`},
		{"repeated capability", func(c *crinetapi.NetworkConfig) { c.Cniv1Config.Plugins[0].Capabilities = []string{"ips", "ips"} },
			`config.cniv1_config.plugins[0].capabilities[1]: "ips": empty or repeated`},
		{"reserved parameter", func(c *crinetapi.NetworkConfig) { c.Cniv1Config.Plugins[0].Parameters["type"] = "x" },
			`config.cniv1_config.plugins[0].parameters: key "type" is reserved`},
		{"bad ipam parameter", func(c *crinetapi.NetworkConfig) { c.Cniv1Config.Plugins[0].Parameters["ipam"] = "[1]" }, "plugins[0].ipam: want an object"},
		{"ip range not a CIDR", func(c *crinetapi.NetworkConfig) {
			c.IpRanges = append(c.IpRanges, &crinetapi.IPRange{Cidr: "10.57.0.0"})
		},
			`config.ip_ranges[1].cidr: "10.57.0.0" is not a CIDR`},
		{"ip range host bits", func(c *crinetapi.NetworkConfig) { c.IpRanges[0].Cidr = "10.56.0.1/24" },
			`config.ip_ranges[0].cidr: "10.56.0.1/24" has host bits set; the range is 10.56.0.0/24`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := sriovNetwork("cnf", "sriov-a")
			tt.change(cfg)
			_, err := h.set(cfg)
			if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("SetPodNetwork: got %v (%s), want InvalidArgument containing %q", err, code(err), tt.want)
			}
		})
	}
	if got := h.list(); len(got) != 1 {
		t.Errorf("invalid configurations were stored: %v", got)
	}
}

func TestCRINet_SetPodNetwork_FallbackIsReadOnly(t *testing.T) {
	h := newHarness(t)
	_, err := h.set(sriovNetwork("", crinet.FallbackName))
	if code(err) != codes.PermissionDenied {
		t.Errorf("SetPodNetwork _fallback: got %v, want PermissionDenied", err)
	}
	if err := h.remove("", crinet.FallbackName, 0); code(err) != codes.PermissionDenied {
		t.Errorf("RemovePodNetwork _fallback: got %v, want PermissionDenied", err)
	}
}

func TestCRINet_SetPodNetwork_Generation(t *testing.T) {
	h := newHarness(t)
	first := h.mustSet(sriovNetwork("cnf", "sriov-a"))
	md := first.GetMetadata()
	if md.GetGeneration() != 1 || md.GetUid() == "" {
		t.Fatalf("created: generation %d uid %q, want 1 and a uid", md.GetGeneration(), md.GetUid())
	}
	if again := h.mustSet(sriovNetwork("cnf", "sriov-a")); again.GetMetadata().GetGeneration() != 1 {
		t.Errorf("unchanged Set: generation %d, want 1", again.GetMetadata().GetGeneration())
	}
	changed := proto.CloneOf(first)
	changed.IpRanges = append(changed.IpRanges, &crinetapi.IPRange{Cidr: "fd00::/64"})
	second := h.mustSet(changed)
	if g := second.GetMetadata().GetGeneration(); g != 2 || second.GetMetadata().GetUid() != md.GetUid() {
		t.Fatalf("changed Set: generation %d uid %q, want 2 and %q", g, second.GetMetadata().GetUid(), md.GetUid())
	}
	stale := proto.CloneOf(first)
	stale.Cniv1Config.DisableCheck = true
	if _, err := h.set(stale); code(err) != codes.Aborted || !strings.Contains(err.Error(), "generation 1 is not the current generation 2") {
		t.Errorf("stale generation: got %v, want Aborted naming generations 1 and 2", err)
	}
	wrongUID := proto.CloneOf(second)
	wrongUID.Metadata.Uid = "other"
	if _, err := h.set(wrongUID); code(err) != codes.Aborted || !strings.Contains(err.Error(), `uid "other"`) {
		t.Errorf("wrong uid: got %v, want Aborted naming the uid", err)
	}
	missing := sriovNetwork("cnf", "sriov-b")
	missing.Metadata.Generation = 3
	if _, err := h.set(missing); code(err) != codes.Aborted {
		t.Errorf("generation of a network that does not exist: got %v, want Aborted", err)
	}
	if err := h.remove("cnf", "sriov-a", 1); code(err) != codes.Aborted {
		t.Errorf("Remove with a stale generation: got %v, want Aborted", err)
	}
}

func TestCRINet_SetPodNetwork_SurvivesRestart(t *testing.T) {
	h := newHarness(t)
	set := h.mustSet(sriovNetwork("", "sriov-a"))
	if set.GetMetadata().GetNamespace() != crinet.DefaultNamespace {
		t.Errorf("namespace: got %q, want %q", set.GetMetadata().GetNamespace(), crinet.DefaultNamespace)
	}
	h.restart()
	got := h.list()["default/sriov-a"]
	if got == nil || !proto.Equal(got.GetConfig(), set) {
		t.Fatalf("after a restart: got %v, want %v", got.GetConfig(), set)
	}
	if !got.GetStatus().GetSandboxManagement() || !got.GetStatus().GetConnectivity() {
		t.Errorf("status after a restart: %v", got.GetStatus())
	}
}

func TestCRINet_SetPodNetwork_SelectableAsNAD(t *testing.T) {
	h := newHarness(t)
	h.mustSet(sriovNetwork("cnf", "sriov-a"))
	nads := crinet.NADs{Store: h.store}
	nad, err := nads.NAD(t.Context(), "cnf", "sriov-a")
	if err != nil {
		t.Fatal(err)
	}
	if nad.ResourceName != "intel.com/sriov_a" {
		t.Errorf("resource: got %q", nad.ResourceName)
	}
	want := `{"cniVersion":"1.1.0","name":"sriov-a","plugins":[{"capabilities":{"ips":true,"mac":true},` +
		`"ipam":{"type":"static"},"personality":"sriov","type":"hwnet-test-plugin","vlan":100}]}`
	if nad.Config != want {
		t.Errorf("config:\n got %s\nwant %s", nad.Config, want)
	}
	if _, err := nads.NAD(t.Context(), "other", "sriov-a"); err == nil {
		t.Errorf("another namespace's network was found")
	}
}

func TestCRINet_RemovePodNetwork_RefusedWhileInUse(t *testing.T) {
	h := newHarness(t)
	h.mustSet(sriovNetwork("cnf", "sriov-a"))
	h.recordPod("c1", "pod-1", "cnf/sriov-a", `{"cniVersion":"1.1.0","interfaces":[{"name":"net1","sandbox":"/x"}],"ips":[{"address":"10.56.0.10/24","interface":0}]}`)
	err := h.remove("cnf", "sriov-a", 0)
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "cnf/pod-1") {
		t.Fatalf("Remove in use: got %v, want FailedPrecondition naming cnf/pod-1", err)
	}
	if h.list()["cnf/sriov-a"] == nil {
		t.Fatalf("a network in use was removed")
	}
	if err := h.records.Remove("c1"); err != nil {
		t.Fatal(err)
	}
	if err := h.remove("cnf", "sriov-a", 1); err != nil {
		t.Fatalf("Remove once unused: %v", err)
	}
	if h.list()["cnf/sriov-a"] != nil {
		t.Errorf("still listed after Remove")
	}
	if err := h.remove("cnf", "sriov-a", 0); code(err) != codes.NotFound {
		t.Errorf("Remove again: got %v, want NotFound", err)
	}
	h.restart()
	if h.list()["cnf/sriov-a"] != nil {
		t.Errorf("back after a restart")
	}
}

func TestCRINet_ListPodNetwork_PodIPsPerNetworkName(t *testing.T) {
	h := newHarness(t)
	h.mustSet(sriovNetwork("cnf", "sriov-a"))
	h.recordPod("c1", "pod-1", "cnf/sriov-a", `{"cniVersion":"1.1.0","interfaces":[{"name":"net1","sandbox":"/x"}],"ips":[{"address":"10.56.0.10/24","interface":0},{"address":"fd00::10/64","interface":0}]}`)
	pods := h.list()["cnf/sriov-a"].GetPods()
	if len(pods) != 1 {
		t.Fatalf("pods: %v", pods)
	}
	p := pods[0]
	if p.GetPodNamespace() != "cnf" || p.GetPodName() != "pod-1" || p.GetInterfaceName() != "net1" || p.GetContainerId() != "c1" {
		t.Errorf("pod: %v", p)
	}
	var ips []string
	for _, ip := range p.GetIps() {
		ips = append(ips, ip.GetNetworkName()+" "+ip.GetIp())
	}
	if want := []string{"cnf/sriov-a 10.56.0.10", "cnf/sriov-a fd00::10"}; strings.Join(ips, ",") != strings.Join(want, ",") {
		t.Errorf("pod IPs: got %v, want %v", ips, want)
	}
	fb := h.list()[crinet.FallbackName].GetPods()
	if len(fb) != 1 || fb[0].GetIps()[0].GetIp() != "10.244.0.5" || fb[0].GetIps()[0].GetNetworkName() != "podnet" {
		t.Errorf("_fallback pods: %v", fb)
	}
}

func TestCRINet_ListPodNetwork_FallbackAlwaysListed(t *testing.T) {
	h := newHarness(t)
	got := h.list()
	if len(got) != 1 || got[crinet.FallbackName].GetStatus().GetSandboxManagement() {
		t.Fatalf("no default configuration: got %v, want _fallback alone, not ready", got)
	}
	conf := `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","master":"eth0","mtu":1500,"capabilities":{"portMappings":true}}]}`
	if err := os.WriteFile(filepath.Join(h.confDir, "10-podnet.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	got = h.list()
	fb := got[crinet.FallbackName]
	if len(got) != 1 || !fb.GetStatus().GetSandboxManagement() || !fb.GetStatus().GetConnectivity() {
		t.Fatalf("backwards-compatible answer: got %v, want _fallback alone and ready", got)
	}
	c := fb.GetConfig().GetCniv1Config()
	p := c.GetPlugins()[0]
	if c.GetNetworkName() != "podnet" || c.GetCniVersion() != "1.1.0" || p.GetType() != cniplugins.Recorder ||
		p.GetParameters()["master"] != "eth0" || p.GetParameters()["mtu"] != "1500" || strings.Join(p.GetCapabilities(), ",") != "portMappings" {
		t.Errorf("_fallback config: %v", fb.GetConfig())
	}
	// A single-plugin .conf sorting first: its name and cniVersion are the
	// list's, not parameters.
	conf = `{"cniVersion":"0.4.0","name":"single","type":"hwnet-test-plugin","vlan":"\"7\""}`
	if err := os.WriteFile(filepath.Join(h.confDir, "05-single.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	fb = h.list()[crinet.FallbackName]
	c = fb.GetConfig().GetCniv1Config()
	if c.GetNetworkName() != "single" || c.GetCniVersion() != "0.4.0" || len(c.GetPlugins()) != 1 ||
		len(c.GetPlugins()[0].GetParameters()) != 1 || c.GetPlugins()[0].GetParameters()["vlan"] != `"\"7\""` {
		t.Errorf("_fallback from a .conf: %v", fb.GetConfig())
	}
}

func TestCRINet_ListPodNetwork_Status(t *testing.T) {
	h := newHarness(t)
	failing := sriovNetwork("cnf", "status-fails")
	failing.Cniv1Config.Plugins[0].Parameters["failOn"] = `["STATUS"]`
	h.mustSet(failing)
	h.mustSet(sriovNetwork("cnf", "ok"))
	got := h.list()
	if st := got["cnf/status-fails"].GetStatus(); !st.GetSandboxManagement() || st.GetConnectivity() || !strings.Contains(st.GetReason(), "STATUS") {
		t.Errorf("STATUS failing: got %v, want sandbox_management only, with the reason", st)
	}
	if st := got["cnf/ok"].GetStatus(); !st.GetSandboxManagement() || !st.GetConnectivity() {
		t.Errorf("healthy network: got %v", st)
	}
	if err := os.Remove(filepath.Join(h.bin, cniplugins.Recorder)); err != nil {
		t.Fatal(err)
	}
	if st := h.list()["cnf/ok"].GetStatus(); st.GetSandboxManagement() || st.GetConnectivity() || !strings.Contains(st.GetReason(), "no such plugin") {
		t.Errorf("plugin uninstalled: got %v, want neither, naming the plugin", st)
	}
}

func TestCRINet_Socket_RootOnly(t *testing.T) {
	h := newHarness(t)
	h.list()
	fi, err := os.Stat(h.socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %s, want a socket with 0600", fi.Mode())
	}
}

// A Set racing lookups (a pod's ADD resolving its network) gives each
// lookup the old configuration or the new one, never a mix.
func TestCRINet_Concurrency_SetRacingLookupGivesOldOrNew(t *testing.T) {
	h := newHarness(t)
	a, b := sriovNetwork("cnf", "sriov-a"), sriovNetwork("cnf", "sriov-a")
	b.Cniv1Config.Plugins[0].Parameters["vlan"] = "200"
	b.Cniv1Config.Plugins[0].Capabilities = []string{"ips"}
	h.mustSet(a)
	nads := crinet.NADs{Store: h.store}
	old, _ := nads.NAD(t.Context(), "cnf", "sriov-a")
	h.mustSet(b)
	updated, _ := nads.NAD(t.Context(), "cnf", "sriov-a")
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		defer cancel()
		for i := range 50 {
			if _, err := h.set([]*crinetapi.NetworkConfig{a, b}[i%2]); err != nil {
				t.Errorf("SetPodNetwork: %v", err)
				return
			}
		}
	})
	seen := map[string]int{}
	for ctx.Err() == nil {
		nad, err := nads.NAD(t.Context(), "cnf", "sriov-a")
		if err != nil {
			t.Fatal(err)
		}
		if nad.Config != old.Config && nad.Config != updated.Config {
			t.Fatalf("a lookup got a mix: %s", nad.Config)
		}
		seen[nad.Config]++
	}
	wg.Wait()
	var list map[string]any
	if err := json.Unmarshal([]byte(updated.Config), &list); err != nil || len(seen) == 0 {
		t.Fatalf("lookups: %v %v", seen, err)
	}
	if g := h.list()["cnf/sriov-a"].GetConfig().GetMetadata().GetGeneration(); g != 52 {
		t.Errorf("generation after 52 changes: %d", g)
	}
}

// Calls on one network are serialised: concurrent Sets each count as one
// change, and of concurrent Sets all made from generation 1 exactly one
// wins.
func TestCRINet_Concurrency_SetsSerialisedPerNetwork(t *testing.T) {
	h := newHarness(t)
	h.mustSet(sriovNetwork("cnf", "sriov-a"))
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			cfg := sriovNetwork("cnf", "sriov-a")
			cfg.Metadata.Generation = 1
			cfg.Cniv1Config.Plugins[0].Parameters["writer"] = fmt.Sprint(i)
			_, err := h.set(cfg)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch code(err) {
		case codes.OK:
			won++
		case codes.Aborted:
		default:
			t.Errorf("SetPodNetwork: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d Sets from generation 1 succeeded, want exactly 1", won)
	}
	for i := range writers {
		wg.Go(func() {
			for j := range 5 {
				cfg := sriovNetwork("cnf", "sriov-a")
				cfg.Cniv1Config.Plugins[0].Parameters["writer"] = fmt.Sprintf("%d-%d", i, j)
				if _, err := h.set(cfg); err != nil {
					t.Errorf("SetPodNetwork: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if g := h.list()["cnf/sriov-a"].GetConfig().GetMetadata().GetGeneration(); g != 2+writers*5 {
		t.Errorf("generation after %d changes: %d, want %d", 1+writers*5, g, 2+writers*5)
	}
}
