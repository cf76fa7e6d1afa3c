package peers

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// benchCNI runs ADD and DEL of pods with 1 and 4 networks through each
// tool as the runtime execs it, in rotating rounds, and the delegate
// alone, whose runs are subtracted to give each tool's own time.
func benchCNI(b *testing.B, t *table, bins string) {
	env := newCNIEnv(b, bins)
	node := dpNode(b, loadVFs)
	tools := []*cniTool{env.startHwnet(b, node, bins)}
	if *multusDir != "" {
		tools = append(tools, env.multusThin(b), env.startMultusThick(b))
	} else {
		t.note("Multus: absent (-multus not given); the hwnet shim and agent measured alone.")
	}
	rts := map[string]*cniRuntime{}
	for _, tool := range append(tools, &cniTool{name: "delegate", confDir: filepath.Join(env.dir, "delegate")}) {
		if tool.name == "delegate" {
			if _, err := writeFile(tool.confDir, "10-podnet.conflist", podnetConf()); err != nil {
				b.Fatal(err)
			}
		}
		rt, err := newRuntime(tool.confDir, env.binDir, filepath.Join(env.dir, "runtime-cache", tool.name), env.netns)
		if err != nil {
			b.Fatal(err)
		}
		rts[tool.name] = rt
	}
	for round := range *rounds {
		for _, nets := range []int{1, 4} {
			// The delegate alone, as many times as the tools run it.
			deleg := env.batch(b, rts["delegate"], *pods*(nets+1), 0)
			// What two execs of a Go program cost before it does anything
			// of its own: the floor under the shim's CPU.
			t.add(fmt.Sprintf("CPU per ADD+DEL of a static Go CNI plugin on libcni's skel that answers at once (the delegate), %d network(s)", nets),
				"ms", "hwnet", ms(deleg.add.cpu+deleg.del.cpu))
			for i := range tools {
				tool := tools[(i+round)%len(tools)]
				env.measure(b, t, tool, rts[tool.name], nets, deleg)
			}
		}
	}
	env.benchLoad(b, t, tools, rts, loadVFs)
	t.note("CNI: %d rounds, order rotating; %d pods per tool, round and network count, each ADD then DEL, run one at a time by libcni as containerd runs plugins; one kube-apiserver (test/kubeapi) for all. Every network, the default one too, is hwnet-test-plugin answering at once; \"own\" subtracts the median of as many runs of it alone (network count + 1 per ADD). Multus thick runs with the daemon configuration its manifest ships (logLevel verbose). CPU from rusage (the exec'd plugin and the children it waited for) and the daemon's scheduler time.",
		*rounds, *pods)
}

// loadVFs is the size of the node the CNI daemons run on.
const loadVFs = 2048

// batchResult is the medians over the pods of one batch.
type batchResult struct {
	add, del plugRun // wall and CPU of the runtime's exec
	daemon   time.Duration
	requests float64 // per pod
}

// batch runs ADD then DEL of n new pods with nets networks through rt,
// and returns the medians; with daemon, also its CPU per pod.
func (e *cniEnv) batch(b *testing.B, rt *cniRuntime, n, nets int, daemon ...*proc) batchResult {
	ps := e.newPods(b, n, nets)
	defer e.deletePods(b, ps)
	ctx := context.Background()
	var addWall, addCPU, delWall, delCPU samples
	var cpu0 time.Duration
	if len(daemon) > 0 && daemon[0] != nil {
		cpu0 = daemon[0].cpu()
	}
	req0 := e.requestsServed(b) - e.ownRequests()
	fail := func(cmd string, pod benchPod, err error) {
		if len(daemon) > 0 && daemon[0] != nil {
			err = fmt.Errorf("%w\n%s log:\n%s", err, daemon[0].name, daemon[0].tail())
		}
		b.Fatalf("%s %s: %v\nconfiguration: %s", cmd, pod.name, err, rt.list.Bytes)
	}
	for _, pod := range ps {
		add, err := rt.add(ctx, pod)
		if err != nil {
			fail("ADD", pod, err)
		}
		del, err := rt.del(ctx, pod)
		if err != nil {
			fail("DEL", pod, err)
		}
		addWall, addCPU = append(addWall, ms(add.wall)), append(addCPU, ms(add.cpu))
		delWall, delCPU = append(delWall, ms(del.wall)), append(delCPU, ms(del.cpu))
	}
	r := batchResult{
		add:      plugRun{wall: fromMS(addWall.median()), cpu: fromMS(addCPU.median())},
		del:      plugRun{wall: fromMS(delWall.median()), cpu: fromMS(delCPU.median())},
		requests: (e.requestsServed(b) - e.ownRequests() - req0) / float64(n),
	}
	if len(daemon) > 0 && daemon[0] != nil {
		r.daemon = (daemon[0].cpu() - cpu0) / time.Duration(n)
	}
	return r
}

// measure runs one batch of a tool and records it beside the delegate's.
func (e *cniEnv) measure(b *testing.B, t *table, tool *cniTool, rt *cniRuntime, nets int, deleg batchResult) {
	var n0, s0 float64
	if tool.metrics != "" {
		n0, s0 = agentADDs(b, tool.metrics)
	}
	r := e.batch(b, rt, *pods, nets, tool.daemon)
	if tool.metrics != "" {
		n1, s1 := agentADDs(b, tool.metrics)
		t.add(fmt.Sprintf("of the ADD, in hwnet-agent (its histogram's mean), %d network(s)", nets), "ms", tool.name, (s1-s0)/(n1-n0)*1000)
	}
	k := time.Duration(nets + 1)
	key := fmt.Sprintf(", %d network(s)", nets)
	t.add("CNI ADD as the runtime sees it"+key, "ms", tool.name, ms(r.add.wall))
	t.add("CNI ADD own time"+key, "ms", tool.name, ms(r.add.wall-k*deleg.add.wall))
	t.add("CNI DEL as the runtime sees it"+key, "ms", tool.name, ms(r.del.wall))
	t.add("CNI DEL own time"+key, "ms", tool.name, ms(r.del.wall-k*deleg.del.wall))
	// Multus thin's process waited for the delegates: their CPU is in its
	// rusage. The shims' delegates ran under the daemons.
	plugCPU := r.add.cpu + r.del.cpu
	if tool.daemon == nil {
		plugCPU -= k * (deleg.add.cpu + deleg.del.cpu)
	}
	t.add("CPU of the exec'd plugin per ADD+DEL, delegates excluded"+key, "ms", tool.name, ms(plugCPU))
	if tool.daemon != nil {
		t.add("daemon CPU per ADD+DEL, delegates excluded"+key, "ms", tool.name, ms(r.daemon))
	}
	t.add("API requests per pod (ADD+DEL)"+key, "requests", tool.name, r.requests)
}

func fromMS(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
