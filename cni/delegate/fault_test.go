package delegate

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
)

func recorderNAD(name, state, extra string) string {
	return `{"cniVersion":"1.0.0","name":"` + name + `","type":"hwnet-test-plugin","personality":"sriov","stateDir":"` + state + `"` + extra + `}`
}

// A delegate failing in the middle of ADD stops it, and what was attached
// before is deleted in reverse: no device, link, record or device-info file
// stays behind (NPWG 7.2).
func TestSpec7_2_FailedAddLeavesNothing(t *testing.T) {
	n := newTestNode(t, "cni-fail-add")
	state := t.TempDir()
	n.createNAD(podNS, "sriov-a", sriovRes, sriovNAD)
	n.createNAD(podNS, "broken", sriovRes, recorderNAD("broken", state, `,"failOn":["ADD"]`))
	n.createNAD(podNS, "never", "", recorderNAD("never", state, ""))
	iavf := n.vfs("iavf", "0000:3e:00.0")
	pod := n.createPod("failing", `[{"name":"sriov-a","ips":["10.56.0.20/24"]},{"name":"broken"},{"name":"never"}]`,
		map[string][]string{sriovRes: {iavf[0].Addr, iavf[1].Addr}})
	podNetns := n.podNetns("hwnet-fail-add")
	waitPod(t, n, podNS, "failing")

	_, err := n.call(context.Background(), "ADD", "fail-sandbox", podNetns, pod)
	if err == nil || !strings.Contains(err.Error(), "injected failure: ADD") || !strings.Contains(err.Error(), "cnf/broken") {
		t.Fatalf("ADD err = %v, want the broken network's failure", err)
	}
	n.assertNothingLeft(podNetns, state)
	n.waitEvent(t, "failing", "NetworkSetupFailed", "injected failure")
}

// The annotation's problems fail the ADD with an error naming the key and
// value, and the pod gets an Event saying so (NPWG 4.1.2.1.4: an invalid
// annotation is never silently ignored by hwnet).
func TestSpec4_1_2_1_InvalidAnnotationFailsWithEvent(t *testing.T) {
	n := newTestNode(t, "cni-bad-annot")
	n.createNAD(podNS, "sriov-a", sriovRes, sriovNAD)
	n.createNAD(podNS, "no-plugin", "", `{"cniVersion":"1.0.0","plugins":[{"type":"not-installed"}]}`)
	tests := []struct {
		pod, networks, reason, want string
	}{
		// The pod is torn down all the same: the rollback's DEL of a plugin
		// that is not there passes over it.
		{"missing-plugin", `no-plugin`, "NetworkSetupFailed", `failed to find plugin "not-installed"`},
		{"bad-mac", `[{"name":"sriov-a","mac":"zz:11"}]`, "InvalidNetworksAnnotation", `"mac" "zz:11"`},
		{"missing-nad", `nope`, "NetworkNotFound", "cnf/nope"},
		{"dup-iface", `[{"name":"sriov-a","interface":"x1"},{"name":"sriov-a","interface":"x1"}]`, "InvalidNetworksAnnotation", `"x1"`},
		{"too-few-devices", `sriov-a,sriov-a`, "NotEnoughDevices", "holds 1 device(s) of intel.com/sriov_a but its networks need 2"},
		{"foreign-namespace", `secret/net`, "NetworkNotAllowed", `may not select NetworkAttachmentDefinitions in namespace "secret"`},
	}
	iavf := n.vfs("iavf", "0000:3e:00.0")
	for _, tt := range tests {
		t.Run(tt.pod, func(t *testing.T) {
			pod := n.createPod(tt.pod, tt.networks, map[string][]string{sriovRes: {iavf[2].Addr}})
			podNetns := n.podNetns("hwnet-" + tt.pod)
			waitPod(t, n, podNS, tt.pod)
			_, err := n.call(context.Background(), "ADD", tt.pod, podNetns, pod)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ADD err = %v, want one naming %s", err, tt.want)
			}
			n.waitEvent(t, tt.pod, tt.reason, tt.want)
			n.assertNothingLeft(podNetns, t.TempDir())
		})
	}
}

func (n *testNode) waitEvent(t *testing.T, pod, reason, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		evs, err := n.api.Client().CoreV1().Events(podNS).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, e := range evs.Items {
				if e.InvolvedObject.Name == pod && e.Reason == reason && strings.Contains(e.Message, text) {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("pod %s got no %s Event mentioning %q", pod, reason, text)
}

// nodeHandler runs each request inside the virtual node, as a
// hostNetwork hwnet-agent pod runs on a real node.
type nodeHandler struct {
	n *testNode
}

func (h nodeHandler) Handle(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
	var out json.RawMessage
	err := h.n.node.Run(ctx, func() error {
		var err error
		out, err = h.n.d.Handle(ctx, req)
		return err
	})
	return out, err
}

// serveAgent serves the node's delegator on a socket, as hwnet-agent does,
// until the returned stop is called.
func (n *testNode) serveAgent(sock string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		server.New(nodeHandler{n}, nil, nodesocket.Access{}).Serve(ctx, sock)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for _, err := os.Stat(sock); err != nil && time.Now().Before(deadline); _, err = os.Stat(sock) {
		time.Sleep(10 * time.Millisecond)
	}
	return func() { cancel(); <-done }
}

// cnitool runs the real cnitool inside the node against hwnet's
// configuration, so the runtime's path is the real one: cnitool, the hwnet
// shim binary, the agent's socket.
func (n *testNode) cnitool(t *testing.T, command, netnsPath, cniArgs string) (string, error) {
	t.Helper()
	confDir := filepath.Join(n.dir, "cnitool-conf")
	os.MkdirAll(confDir, 0o755)
	if err := os.WriteFile(filepath.Join(confDir, "00-hwnet.conflist"), n.shimConfList(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(n.bin, "cnitool"), command, "hwnet", netnsPath)
	cmd.Env = append(os.Environ(), "NETCONFPATH="+confDir, "CNI_PATH="+n.shimDir(t)+":"+n.bin,
		"CNI_ARGS="+cniArgs, "CNI_IFNAME=eth0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := n.node.Exec(context.Background(), cmd)
	return out.String(), err
}

func (n *testNode) shimConfList() []byte {
	var conf map[string]json.RawMessage
	json.Unmarshal(n.conf, &conf)
	conf["socketPath"], _ = json.Marshal(filepath.Join(n.dir, "agent.sock"))
	conf["agentWait"], _ = json.Marshal("300ms")
	delete(conf, "cniVersion")
	delete(conf, "name")
	list, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "hwnet", "plugins": []any{conf}})
	return list
}

// shimDir builds the hwnet shim binary once per test.
func (n *testNode) shimDir(t *testing.T) string {
	dir := filepath.Join(n.dir, "shim")
	if _, err := os.Stat(filepath.Join(dir, "hwnet")); err == nil {
		return dir
	}
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "hwnet"), "github.com/hwnet-io/hwnet/cmd/hwnet").CombinedOutput()
	if err != nil {
		t.Fatalf("building the hwnet shim: %v\n%s", err, out)
	}
	return dir
}

// Driven by cnitool through the hwnet shim and the agent's socket; then,
// with the API server and the agent both stopped, DEL still detaches
// everything from the on-disk record, and a second DEL succeeds.
func TestSpec7_2_DelWithoutAgentOrAPIServer(t *testing.T) {
	n := newTestNode(t, "cni-del-alone")
	state := t.TempDir()
	n.createNAD(podNS, "sriov-a", sriovRes, sriovNAD)
	n.createNAD(podNS, "rec", sriovRes, recorderNAD("rec", state, ""))
	iavf := n.vfs("iavf", "0000:3e:00.0")
	pod := n.createPod("alone", `[{"name":"sriov-a","ips":["10.56.0.30/24"]},{"name":"rec"}]`,
		map[string][]string{sriovRes: {iavf[3].Addr, iavf[4].Addr}})
	podNetns := n.podNetns("hwnet-del-alone")
	waitPod(t, n, podNS, "alone")
	stop := n.serveAgent(filepath.Join(n.dir, "agent.sock"))
	args := "IgnoreUnknown=1;K8S_POD_NAMESPACE=" + podNS + ";K8S_POD_NAME=alone;K8S_POD_UID=" + string(pod.UID)

	if out, err := n.cnitool(t, "add", podNetns, args); err != nil {
		stop()
		t.Fatalf("cnitool add: %v\n%s", err, out)
	}
	if links := linksIn(t, podNetns); links["net1"] == nil {
		t.Fatalf("after cnitool add the pod has %v, want net1", names(links))
	}
	stop()
	n.api.Stop(t)
	for i := range 2 {
		if out, err := n.cnitool(t, "del", podNetns, args); err != nil {
			t.Fatalf("cnitool del %d without agent and API server: %v\n%s", i+1, err, out)
		}
	}
	n.assertNothingLeft(podNetns, state)
}

// The device-info files are written while the default network's ADD runs.
// One that cannot be written fails the ADD before its delegate runs, and
// the default network's attachment is deleted again (NPWG 7.2).
func TestSpec7_2_DeviceInfoWriteFailureUndoesAdd(t *testing.T) {
	n := newHarness(t)
	state := t.TempDir()
	writeFile(t, filepath.Join(n.dir, "net.d", "10-podnet.conflist"),
		`{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","personality":"plain","stateDir":"`+state+`"}]}`)
	// A file where the device-info directory should be.
	writeFile(t, filepath.Join(n.dir, "devinfo", "cni"), "")
	n.createNAD(podNS, "rec", sriovRes, recorderNAD("rec", state, ""))
	pod := n.createPod("no-devinfo", `[{"name":"rec"}]`, map[string][]string{sriovRes: {"0000:3b:02.0"}})
	waitPod(t, n, podNS, "no-devinfo")

	_, err := n.d.Handle(context.Background(), n.request("ADD", "no-devinfo", pod))
	if err == nil || !strings.Contains(err.Error(), "network cnf/rec") || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("ADD err = %v, want the device-info write of network cnf/rec failing", err)
	}
	for _, dir := range []string{state, filepath.Join(n.dir, "cache", "containers")} {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("%s still holds %s after the failed ADD", dir, entries[0].Name())
		}
	}
}
