package agent_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/dra"
)

// add is the runtime's CNI ADD of a new sandbox for a pod that holds
// devices and has none; a failed ADD is followed by its DEL, as the
// runtime does.
func (s *soak) add() string {
	pod, owner, res, ids := s.pickAttachable()
	if pod == nil {
		return "nothing: no pod without a sandbox"
	}
	sb := s.nextName("sb")
	before := s.guards(res, s.layout.dra[res], ids)
	err := s.w.cniCall("ADD", sb, pod)
	got := s.w.attached(sb)
	after := s.guards(res, s.layout.dra[res], ids)
	if err != nil {
		if derr := s.w.cniCall("DEL", sb, pod); derr != nil {
			s.w.t.Fatalf("DEL of %s after its failed ADD: %v", sb, derr)
		}
		return fmt.Sprintf("refused %s of %s: %v", sb, pod.Name, err)
	}
	s.handedOut("ADD of "+sb, got, before, after)
	s.m.sandboxes[sb] = &sandbox{pod: pod, owner: owner, devices: got}
	s.setSandbox(owner, sb)
	return fmt.Sprintf("ok %s of %s attached %v", sb, pod.Name, got)
}

// pickAttachable is a random pod of the test's that has devices and no
// sandbox, with its owner, pool and devices; nil when there is none. A
// device plugin pod is none while kubelet's PodResources is down: kubelet
// starts no sandbox then, and the ADD would wait for it.
func (s *soak) pickAttachable() (*corev1.Pod, string, string, []string) {
	type cand struct {
		pod     *corev1.Pod
		owner   string
		res     string
		devices []string
	}
	var cands []cand
	for name, p := range s.m.pods {
		if p.sandbox == "" && s.w.podres != nil {
			cands = append(cands, cand{p.pod, podOwner(name), p.resource, p.devices})
		}
	}
	for name, c := range s.m.claims {
		if c.sandbox == "" {
			cands = append(cands, cand{c.pod, claimOwner(name), s.poolOf(c.devices[0]), c.devices})
		}
	}
	if len(cands) == 0 {
		return nil, "", "", nil
	}
	slices.SortFunc(cands, func(a, b cand) int { return strings.Compare(a.owner, b.owner) })
	c := cands[s.rng.IntN(len(cands))]
	return c.pod, c.owner, c.res, c.devices
}

// poolOf is the pool of a VF, by the driver it has now.
func (s *soak) poolOf(id string) string {
	f, _ := s.w.node.Device(id)
	return resourceOf(f.Driver)
}

func (s *soak) setSandbox(owner, sb string) {
	if name, ok := strings.CutPrefix(owner, "pod "); ok {
		s.m.pods[name].sandbox = sb
	} else if name, ok := strings.CutPrefix(owner, "claim "); ok {
		s.m.claims[name].sandbox = sb
	}
}

// del is the runtime's CNI DEL of a sandbox.
func (s *soak) del() string {
	sb, ok := pickKey(s, s.m.sandboxes)
	if !ok {
		return "nothing: no sandbox"
	}
	s.tearDown(sb)
	return "ok " + sb
}

// tearDown deletes the sandbox's attachments; a DEL must succeed.
func (s *soak) tearDown(sb string) {
	x := s.m.sandboxes[sb]
	if err := s.w.cniCall("DEL", sb, x.pod); err != nil {
		s.w.t.Fatalf("DEL of %s: %v", sb, err)
	}
	delete(s.m.sandboxes, sb)
	s.setSandbox(x.owner, "")
}

// modeSwitch is the admin switching a pool between its device plugin and
// the DRA driver; it waits until the pool's new front end serves it.
func (s *soak) modeSwitch() string {
	res := soakPools()[s.rng.IntN(len(soakPools()))]
	s.layout.dra[res] = !s.layout.dra[res]
	regs := len(s.w.kubelet.Registrations())
	s.w.writeConfig(s.layout)
	if !s.layout.dra[res] {
		s.w.waitRegistered([]string{res}, regs)
		return "ok " + res + " to its device plugin"
	}
	// The slices may still list the pool from when it was last in DRA
	// mode: its device plugin ending says the agent made the switch.
	s.w.waitFor(res+"'s device plugin stopped", func() bool { return s.w.kubelet.Resource(res).Ended })
	s.w.waitFor(res+" published", func() bool { return len(s.w.offers(res, true)) > 0 })
	return "ok " + res + " to DRA"
}

// vfLayout is the admin changing PF 0's declared VF layout, 8 VFs to 4
// or back; the agent applies it once no VF of the PF is held.
func (s *soak) vfLayout() string {
	s.layout.small = !s.layout.small
	s.w.writeConfig(s.layout)
	if s.layout.small {
		return "ok PF 0 to 4 VFs"
	}
	return "ok PF 0 to 8 VFs"
}

// agentRestart stops the agent, as SIGTERM does, and starts a new one.
func (s *soak) agentRestart() string {
	s.w.stopAgent()
	s.w.startAgent(s.layout)
	s.waitUnknown()
	return "ok"
}

// agentRestartBlind restarts the agent while kubelet's PodResources
// cannot be read: the new agent must know it cannot know.
func (s *soak) agentRestartBlind() string {
	if s.m.torn {
		return "nothing: a checkpoint is torn, one unreadable source at a time"
	}
	s.w.stopAgent()
	s.w.closePodResources()
	s.w.startAgent(s.layout)
	s.waitUnknown()
	return "ok, PodResources down"
}

// expectUnknown is how many sources of holders the test made unreadable.
func (s *soak) expectUnknown() int {
	n := 0
	if s.w.podres == nil {
		n++
	}
	if s.m.torn {
		n++
	}
	return n
}

// waitUnknown waits until the agent reports as many unknown sources as
// the test made, but for a torn checkpoint: an idle agent reads the
// other drivers' checkpoints every 30 s, so the test does not wait for
// it to notice one, and guards by what the agent reports.
func (s *soak) waitUnknown() {
	want := s.expectUnknown()
	s.w.waitFor(fmt.Sprintf("%d unknown sources of holders", want), func() bool {
		n := s.w.unknownSources()
		return n == want || (s.m.torn && n < want)
	})
}

// kubeletRestart is kubelet restarting: every socket in its device
// plugin directory goes, its PodResources comes back with the pods it
// had (unless it was down).
func (s *soak) kubeletRestart() string {
	regs := len(s.w.kubelet.Registrations())
	up := s.w.podres != nil
	s.w.closePodResources()
	if err := s.w.kubelet.Restart(); err != nil {
		s.w.t.Fatal(err)
	}
	if up {
		s.w.servePodResources(s.w.opts.PodResourcesSocket, s.podsOrdered())
	}
	s.w.waitRegistered(s.layout.devicePluginPools(), regs)
	s.waitUnknown()
	return "ok"
}

func (s *soak) podsOrdered() []*dpPod {
	var out []*dpPod
	for _, name := range slices.Sorted(maps.Keys(s.m.pods)) {
		out = append(out, s.m.pods[name])
	}
	return out
}

// kubeletDownUp takes kubelet's PodResources away, as a kubelet that
// restarts and serves device plugins before it, or brings it back.
func (s *soak) kubeletDownUp() string {
	if s.w.podres == nil {
		s.podResourcesUp()
		return "ok, PodResources up"
	}
	if s.m.torn {
		return "nothing: a checkpoint is torn, one unreadable source at a time"
	}
	regs := len(s.w.kubelet.Registrations())
	s.w.closePodResources()
	if err := s.w.kubelet.Restart(); err != nil {
		s.w.t.Fatal(err)
	}
	s.w.waitRegistered(s.layout.devicePluginPools(), regs)
	s.waitUnknown()
	return "ok, PodResources down"
}

func (s *soak) podResourcesUp() {
	s.w.servePodResources(s.w.opts.PodResourcesSocket, s.podsOrdered())
	s.waitUnknown()
}

// netdevVanishBack moves a free VF's netdev out of the node, as a
// netdev taken by something outside hwnet, and waits until the agent
// withholds the VF; or brings one back.
func (s *soak) netdevVanishBack() string {
	gone := slices.Sorted(maps.Keys(s.m.vanished))
	free := s.freeNetdevVFs()
	if len(gone) > 0 && (len(free) == 0 || s.rng.IntN(2) == 0) {
		id := gone[s.rng.IntN(len(gone))]
		s.netdevBack(id)
		return "ok back " + id
	}
	if len(free) == 0 {
		return "nothing: no free VF with a netdev"
	}
	id := free[s.rng.IntN(len(free))]
	f, _ := s.w.node.Device(id)
	moveLink(s.w.t, s.w.node.NetnsName(), s.w.limbo, f.Ifname)
	s.m.vanished[id] = f.Ifname
	s.w.waitFor(id+" withheld", func() bool { return !s.offered(id) })
	return "ok vanished " + id
}

// freeNetdevVFs are PF 1's VFs with a netdev that no one holds and
// that are in the node: PF 0's come and go with its VF layout.
func (s *soak) freeNetdevVFs() []string {
	owners := s.m.owners()
	var out []string
	for _, f := range s.w.node.Devices() {
		if f.PF != "" && !onPF0(f.Addr) && f.Driver == "iavf" && len(owners[f.Addr]) == 0 && s.m.vanished[f.Addr] == "" {
			out = append(out, f.Addr)
		}
	}
	slices.Sort(out)
	return out
}

func (s *soak) netdevBack(id string) {
	moveLink(s.w.t, s.w.limbo, s.w.node.NetnsName(), s.m.vanished[id])
	delete(s.m.vanished, id)
	// A device one of the test's pods or claims holds is not offered
	// again until they end: the agent may have handed it out while its
	// netdev was away, as one a pending allocation holds may be in a pod.
	if s.expectUnknown() == 0 && !s.m.pf1Down && len(s.m.owners()[id]) == 0 {
		s.w.waitFor(id+" offered again", func() bool { return s.offered(id) })
	}
}

// offered reports whether the device's pool offers it now.
func (s *soak) offered(id string) bool {
	res := s.poolOf(id)
	for _, o := range s.w.offers(res, s.layout.dra[res]) {
		if o.id == id {
			return o.offered
		}
	}
	return false
}

// pf1 is the default virtual node's second E810-C, whose link the test
// takes down: its VFs go unhealthy.
const pf1 = "enp62s0f0"

// pfLinkDownUp takes PF 1's link down and waits until the agent withholds
// its VFs, or brings it back up.
func (s *soak) pfLinkDownUp() string {
	s.m.pf1Down = !s.m.pf1Down
	if err := s.w.node.SetLinkUp(context.Background(), pf1, !s.m.pf1Down); err != nil {
		s.w.t.Fatal(err)
	}
	if s.m.pf1Down {
		s.w.waitFor("PF 1's VFs withheld", func() bool { return !slices.ContainsFunc(s.pf1VFs(), s.offered) })
		return "ok down"
	}
	if s.expectUnknown() == 0 {
		s.w.waitFor("PF 1's free VFs offered again", func() bool {
			return !slices.ContainsFunc(s.freeNetdevVFs(), func(id string) bool { return !s.offered(id) })
		})
	}
	return "ok up"
}

// pf1VFs are PF 1's VFs.
func (s *soak) pf1VFs() []string {
	var out []string
	for _, f := range s.w.node.Devices() {
		if f.PF != "" && !onPF0(f.Addr) {
			out = append(out, f.Addr)
		}
	}
	return out
}

// tornCheckpoint is another DRA driver's checkpoint: an hwnet one, its
// marker says, cut short by a crash.
func (s *soak) tornCheckpoint() string {
	return filepath.Join(s.w.opts.DRAPluginsDir, "other.example.com", "checkpoint.json")
}

// checkpointTearMend tears another driver's hwnet checkpoint, or removes
// the torn one, and waits until the agent reports what it can read.
func (s *soak) checkpointTearMend() string {
	path := s.tornCheckpoint()
	if s.m.torn {
		s.mendCheckpoint()
		return "ok mended"
	}
	if s.w.podres == nil {
		return "nothing: PodResources is down, one unreadable source at a time"
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		s.w.t.Fatal(err)
	}
	torn := `{"format":"` + checkpoint.Marker + `","version":3,"checksum":"sha256:00","claims":{"uid-1":{"namespace":"soak","na`
	if err := os.WriteFile(path, []byte(torn), 0o600); err != nil {
		s.w.t.Fatal(err)
	}
	s.m.torn = true
	return "ok torn"
}

func (s *soak) mendCheckpoint() {
	if err := os.Remove(s.tornCheckpoint()); err != nil {
		s.w.t.Fatal(err)
	}
	s.m.torn = false
	s.waitUnknown()
}

// drain ends everything the sequence started: faults undone, sandboxes
// torn down, claims unprepared, pods gone, the base configuration back.
func (s *soak) drain() {
	if s.m.torn {
		s.mendCheckpoint()
	}
	if s.w.podres == nil {
		s.podResourcesUp()
	}
	for _, id := range slices.Sorted(maps.Keys(s.m.vanished)) {
		s.netdevBack(id)
	}
	if s.m.pf1Down {
		s.pfLinkDownUp()
	}
	for _, sb := range slices.Sorted(maps.Keys(s.m.sandboxes)) {
		s.tearDown(sb)
	}
	for _, name := range slices.Sorted(maps.Keys(s.m.claims)) {
		s.release(name)
	}
	for _, name := range slices.Sorted(maps.Keys(s.m.pods)) {
		s.forget(name)
	}
	// Written even when unchanged: the reload reads kubelet at once,
	// where an idle agent would ask it only every 30 s.
	s.layout = baseLayout()
	s.w.writeConfig(s.layout)
}

// waitBaseline waits until the node is as before any hand-out: no record,
// attachment, device-info file, prepared claim, CDI spec or fence left,
// every source read, PF 0 as declared, every pooled device offered.
func (s *soak) waitBaseline() {
	w := s.w
	empty := func(what, dir string) {
		w.waitFor("no "+what+" in "+dir, func() bool { es, _ := os.ReadDir(dir); return len(es) == 0 })
	}
	w.waitFor("no CNI record", func() bool { ids, err := w.records.List(); return err == nil && len(ids) == 0 })
	empty("delegate attachment", w.state)
	empty("device-info file", w.opts.DevinfoDir)
	empty("device-info file", w.opts.CNI.DevinfoDir)
	empty("fence", w.opts.FenceDir)
	w.waitFor("no CDI spec", func() bool {
		specs, _ := filepath.Glob(filepath.Join(w.opts.CDIDir, "*.json"))
		return len(specs) == 0
	})
	w.waitFor("no prepared claim", s.noClaimPrepared)
	w.waitFor("every source of holders read", func() bool { return w.unknownSources() == 0 })
	w.waitFor("PF 0 with 8 VFs, 6-7 on vfio-pci", s.pf0AsDeclared)
	for res, want := range map[string]int{netdevice: 12, dpdk: 4} {
		w.waitFor(fmt.Sprintf("the %d devices of %s offered", want, res), func() bool { return s.allOffered(res, want) })
	}
}

func (s *soak) noClaimPrepared() bool {
	data, err := os.ReadFile(dra.CheckpointPath(dra.DefaultDriverName, s.w.opts.DRA.PluginDir))
	if os.IsNotExist(err) {
		return true
	}
	cp, derr := checkpoint.Decode(data)
	return err == nil && derr == nil && len(cp.Claims) == 0
}

// pf0AsDeclared reports whether PF 0 has the base layout's VFs.
func (s *soak) pf0AsDeclared() bool {
	n := 0
	for _, f := range s.w.node.Devices() {
		if f.PF != pf0 {
			continue
		}
		n++
		want := "iavf"
		if strings.HasSuffix(f.Addr, ".6") || strings.HasSuffix(f.Addr, ".7") {
			want = "vfio-pci"
		}
		if f.Driver != want {
			return false
		}
	}
	return n == 8
}

// allOffered reports whether the pool offers want devices, every one,
// through its base front end alone.
func (s *soak) allOffered(res string, want int) bool {
	viaDRA := s.layout.dra[res]
	got := s.w.offers(res, viaDRA)
	if len(got) != want || (!viaDRA && len(s.w.offers(res, true)) > 0) {
		return false
	}
	// The slices may still list a pool that went back to its device
	// plugin: in DRA mode that plugin must have stopped too, or the
	// agent has not applied the layout yet.
	if st := s.w.kubelet.Resource(res); viaDRA && st.Registered && !st.Ended {
		return false
	}
	for _, o := range got {
		if !o.offered {
			return false
		}
	}
	return true
}

// checkLive fails a run that handed nothing out, and a long one that did
// not hand out each way: a product that refuses everything keeps every
// invariant.
func (s *soak) checkLive(steps int) {
	kinds := []string{"allocate ok", "prepare ok", "add ok"}
	n := 0
	for _, kind := range kinds {
		n += s.outcomes[kind]
		if s.outcomes[kind] == 0 && steps >= 10*sequenceLen {
			s.w.t.Errorf("no %s in %d steps: outcomes %v", kind, steps, s.outcomes)
		}
	}
	if n == 0 && steps >= 2*sequenceLen {
		s.w.t.Errorf("nothing handed out in %d steps: outcomes %v", steps, s.outcomes)
	}
}
