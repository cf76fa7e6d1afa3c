package ledger_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hwnet-io/hwnet/node/ledger"
)

// allocate is kubelet's device manager allocating devices of a resource
// through its device plugin: devices no pod of that resource has, as
// kubelet keeps them apart itself. Kubelet records most allocations; some
// pods it refuses after Allocate (their hold must lapse).
func (r *ilRun) allocate() string {
	if r.m.kubeletDown || r.m.kubeletStarting {
		return "nothing: kubelet is not up"
	}
	res := r.pick([]string{poolA, poolA2, poolB})
	taken := map[string]bool{}
	for _, p := range r.m.pods {
		if p.resource == res {
			for _, d := range p.devices {
				taken[d] = true
			}
		}
	}
	devices := slices.DeleteFunc(r.kubeletChoice(res), func(d string) bool { return taken[d] })
	if len(devices) == 0 {
		return "nothing: kubelet has none of " + res + " free"
	}
	name := r.m.name("pod")
	if len(r.m.gone) > 0 && r.rng.IntN(3) == 0 {
		name = r.pick(r.m.gone) // a StatefulSet's pod, recreated
	}
	if err := r.reserve(ledger.Holder{Kind: ledger.Pod, Resource: res}, "pod "+name, devices); err != nil {
		return "refused: " + err.Error()
	}
	if r.rng.IntN(5) == 0 {
		return "ok, but kubelet refused the pod"
	}
	r.m.gone = slices.DeleteFunc(r.m.gone, func(n string) bool { return n == name })
	p := &ilPod{uid: r.m.name(name + "-uid"), resource: res, devices: devices}
	r.m.pods[name] = p
	if r.rng.IntN(3) == 0 {
		// Kubelet records the pod a moment after Allocate answers: the
		// Book may read PodResources without it meanwhile.
		p.unreported = true
		return "ok " + name + " got " + strings.Join(devices, " ") + ", not reported yet"
	}
	r.w.setPod(name, res, devices...)
	return "ok " + name + " got " + strings.Join(devices, " ")
}

// report is kubelet recording a pod it allocated devices for, which
// PodResources reports from then on.
func (r *ilRun) report() string {
	var names []string
	for name, p := range r.m.pods {
		if p.unreported {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "nothing: every pod reported"
	}
	name := r.pick(slices.Sorted(slices.Values(names)))
	r.reportPod(name)
	return "ok " + name
}

func (r *ilRun) reportPod(name string) {
	p := r.m.pods[name]
	p.unreported = false
	r.w.setPod(name, p.resource, p.devices...)
}

// reportAll records every pod not reported yet: kubelet does so within
// moments of Allocate, before seconds pass or anything restarts.
func (r *ilRun) reportAll() {
	for _, name := range slices.Sorted(maps.Keys(r.m.pods)) {
		if r.m.pods[name].unreported {
			r.reportPod(name)
		}
	}
}

// kubeletChoice is what kubelet allocates of the resource: some of its
// devices, often one a sandbox left behind still holds (kubelet let its
// pod go).
func (r *ilRun) kubeletChoice(res string) []string {
	var left []string
	for _, sb := range r.m.sandboxes {
		if sb.owner == "" && sb.resource == res {
			left = append(left, sb.devices...)
		}
	}
	if len(left) > 0 && r.rng.IntN(2) == 0 {
		slices.Sort(left)
		return []string{r.pick(left)}
	}
	return r.somePoolDevices(res)
}

// deletePod is kubelet letting a pod go, its sandbox torn down first;
// or, its DEL lost (the agent was down), left with its sandbox, which
// holds its devices on its own until the runtime's GC tears it down.
func (r *ilRun) deletePod() string {
	name, ok := pickKey(r, r.m.pods)
	if !ok || r.m.kubeletDown || r.m.kubeletStarting {
		return "nothing: no pod, or kubelet is not up"
	}
	if r.rng.IntN(4) > 0 {
		r.forgetPod(name)
		return "ok " + name
	}
	for _, sb := range r.m.sandboxes {
		if sb.owner == "pod "+name {
			sb.owner = ""
		}
	}
	r.letGo(name)
	return "ok " + name + ", its DEL lost"
}

func (r *ilRun) forgetPod(name string) {
	r.delSandboxesOf("pod " + name)
	r.letGo(name)
}

// letGo is kubelet forgetting the pod's allocation, and the node's pods
// cache telling the Book the pod went.
func (r *ilRun) letGo(name string) {
	p := r.m.pods[name]
	delete(r.m.pods, name)
	r.m.gone = append(r.m.gone, name)
	r.w.setPod(name, p.resource)
	r.w.book.PodEnded()
}

// prepare is the DRA driver preparing a claim of any devices of a pool,
// as a scheduler with a stale view, or a claim that tolerates a taint,
// would ask.
func (r *ilRun) prepare() string {
	res := r.pick([]string{poolA, poolB})
	name := r.m.name("claim")
	c := &ilClaim{uid: name + "-uid", podUID: name + "-pod", resource: res, devices: r.somePoolDevices(res)}
	h := ledger.Holder{Kind: ledger.Claim, Resource: res, Namespace: ilNS, Name: name, UID: c.uid, PodUIDs: []string{c.podUID}}
	if err := r.reserve(h, "claim "+name, c.devices); err != nil {
		return "refused: " + err.Error()
	}
	r.m.claims[name] = c
	r.w.writeCheckpoint()
	return "ok " + name + " got " + strings.Join(c.devices, " ")
}

// unprepare takes the claim out of the checkpoint, then releases it, as
// package dra does.
func (r *ilRun) unprepare() string {
	name, ok := pickKey(r, r.m.claims)
	if !ok {
		return "nothing: no claim"
	}
	r.unprepareClaim(name)
	return "ok " + name
}

func (r *ilRun) unprepareClaim(name string) {
	r.delSandboxesOf("claim " + name)
	c := r.m.claims[name]
	delete(r.m.claims, name)
	r.w.writeCheckpoint()
	r.w.book.Release(context.Background(), ledger.Holder{Kind: ledger.Claim, Namespace: ilNS, Name: name, UID: c.uid})
}

// add is a CNI ADD binding devices to a sandbox: a pod's allocated
// devices, a claim's for its pod, or devices the sandbox has no right to
// (a network naming a device it was not given).
func (r *ilRun) add() string {
	id := r.m.name("sb")
	var sb *ilSandbox
	switch r.rng.IntN(3) {
	case 0:
		sb = r.podSandbox()
	case 1:
		sb = r.claimSandbox()
	}
	if sb == nil {
		res := r.pick([]string{poolA, poolB})
		sb = &ilSandbox{pod: id + "-pod", podUID: id + "-uid", devices: r.somePoolDevices(res)}
	}
	h := ledger.Holder{Kind: ledger.Container, Resource: sb.resource, Namespace: ilNS, Name: sb.pod, Container: id,
		PodUIDs: []string{sb.podUID}, UID: sb.claimUID}
	if err := r.reserve(h, cmpOr(sb.owner, "sandbox "+id), sb.devices); err != nil {
		return "refused: " + err.Error()
	}
	r.m.sandboxes[id] = sb
	r.w.writeRecord(id, sb)
	return "ok " + id + " attached " + strings.Join(sb.devices, " ") + " for " + cmpOr(sb.owner, "itself")
}

// podSandbox is the sandbox of a pod kubelet allocated devices to, nil
// when there is none without one.
func (r *ilRun) podSandbox() *ilSandbox {
	names := slices.DeleteFunc(slices.Sorted(maps.Keys(r.m.pods)), func(n string) bool { return r.hasSandbox("pod " + n) })
	if len(names) == 0 {
		return nil
	}
	name := r.pick(names)
	p := r.m.pods[name]
	return &ilSandbox{pod: name, podUID: p.uid, resource: p.resource, owner: "pod " + name, devices: p.devices}
}

// claimSandbox is the sandbox of the pod a claim is reserved for.
func (r *ilRun) claimSandbox() *ilSandbox {
	names := slices.DeleteFunc(slices.Sorted(maps.Keys(r.m.claims)), func(n string) bool { return r.hasSandbox("claim " + n) })
	if len(names) == 0 {
		return nil
	}
	name := r.pick(names)
	c := r.m.claims[name]
	return &ilSandbox{pod: name + "-pod", podUID: c.podUID, resource: c.resource, claimUID: c.uid, owner: "claim " + name, devices: c.devices}
}

func (r *ilRun) hasSandbox(owner string) bool {
	for _, sb := range r.m.sandboxes {
		if sb.owner == owner {
			return true
		}
	}
	return false
}

func (r *ilRun) del() string {
	id, ok := pickKey(r, r.m.sandboxes)
	if !ok {
		return "nothing: no sandbox"
	}
	r.delSandbox(id)
	return "ok " + id
}

// pickKey is one of the map's keys, false when it is empty.
func pickKey[V any](r *ilRun, m map[string]V) (string, bool) {
	if len(m) == 0 {
		return "", false
	}
	return r.pick(slices.Sorted(maps.Keys(m))), true
}

// delSandboxesOf runs the DEL of the owner's sandboxes, as kubelet
// does before it lets a pod or a claim go.
func (r *ilRun) delSandboxesOf(owner string) {
	for _, id := range slices.Sorted(maps.Keys(r.m.sandboxes)) {
		if r.m.sandboxes[id].owner == owner {
			r.delSandbox(id)
		}
	}
}

// delSandbox is the CNI DEL: the record goes, then the hold.
func (r *ilRun) delSandbox(id string) {
	delete(r.m.sandboxes, id)
	r.w.removeRecord(id)
	r.w.book.Release(context.Background(), ledger.Holder{Kind: ledger.Container, Container: id})
}

// fence is a VF layout change fencing its PF, which must be free, or a
// pool's mode switch fencing its devices, held or not.
func (r *ilRun) fence() string {
	pf := r.pick([]string{ilPFA, ilPFB})
	f, free := modeFence(r.pick([]string{poolA, poolB})), false
	if r.rng.IntN(2) == 0 {
		f, free = layoutFence(pf), true
	}
	owners := r.m.owners()
	if err := r.w.book.Fence(context.Background(), f, free); err != nil {
		return "refused " + f.Key + ": " + err.Error()
	}
	if free {
		for _, d := range ilVFs(f.PF) {
			if len(owners[d]) > 0 {
				r.fail("%s taken while %v held %s", f.Key, owners[d], d)
			}
		}
		if fault := r.m.faulty(); fault != "" && r.m.seen {
			r.fail("%s taken while %s, which the Book had read", f.Key, fault)
		}
	}
	r.m.fences[f.Key] = f
	return "ok " + f.Key
}

func (r *ilRun) unfence() string {
	key, ok := pickKey(r, r.m.fences)
	if !ok {
		return "nothing: no fence"
	}
	r.lift(key)
	return "ok " + key
}

func (r *ilRun) lift(key string) {
	if err := r.w.book.Unfence(key); err != nil {
		r.w.t.Fatalf("Unfence %s: %v", key, err)
	}
	delete(r.m.fences, key)
}

// judge is the health watch's verdict: none to two devices unhealthy,
// none to two whose netdev is away.
func (r *ilRun) judge() string {
	all := append(ilVFs(ilPFA), ilVFs(ilPFB)...)
	bad, away := map[string]string{}, map[string]bool{}
	for range r.rng.IntN(3) {
		bad[r.pick(all)] = "its netdev left the node"
	}
	for range r.rng.IntN(3) {
		away[r.pick(all)] = true
	}
	r.m.unhealthy, r.m.away = bad, away
	r.w.book.Judge(ledger.Verdicts{Unhealthy: maps.Clone(bad), Away: maps.Clone(away)})
	return "ok " + strings.Join(slices.Sorted(maps.Keys(bad)), " ") + "; away " + strings.Join(slices.Sorted(maps.Keys(away)), " ")
}

// poll is the Book reading every source: one it cannot read must show.
func (r *ilRun) poll() string {
	l := r.w.book.Refresh(context.Background())
	r.read(l)
	return "ok, unknown " + l.UnknownWhy()
}

// watchPoll is the agent's Watch polling with its own reader, which asks
// kubelet only now and then and reuses its last answer between, and the
// Book taking the read.
func (r *ilRun) watchPoll() string {
	// Watch asks kubelet at every poll while the Book is unsettled; a
	// poll that may not ask it cannot know kubelet went down.
	urgent := r.w.book.Unsettled() || r.rng.IntN(3) == 0
	l := ledger.PollWatch(context.Background(), r.w.book, r.w.watch, urgent)
	if urgent {
		r.read(r.w.book.Snapshot())
	}
	return "ok, unknown " + l.UnknownWhy()
}

// read checks a read of the sources against the faults in force.
func (r *ilRun) read(l *ledger.Ledger) {
	fault := r.m.faulty()
	if fault == "" {
		return
	}
	r.m.seen = true
	if l.Complete() {
		r.fail("the Book read every source while %s", fault)
	}
}

// passTime moves the clock. A starting kubelet has loaded its pods by
// the time it has run KubeletSettle: that is the setting's promise.
func (r *ilRun) passTime() string {
	r.reportAll()
	d := time.Duration(1+r.rng.IntN(15)) * time.Second
	r.w.now = r.w.now.Add(d)
	if r.m.kubeletStarting && !r.w.now.Before(r.m.kubeletSince.Add(kubeletSettle)) {
		r.w.kubeletStarted()
		return "ok " + d.String() + ", kubelet started"
	}
	return "ok " + d.String()
}

// agentRestart is a new agent: its Book knows only what the sources and
// the fence files say. A mode switch's fence and the verdicts go with the
// old agent; the new one takes them again as it needs them.
func (r *ilRun) agentRestart() string {
	r.w.book.Close()
	r.restartBook()
	return "ok, unknown " + r.w.book.Snapshot().UnknownWhy()
}

// restartBook starts the agent's Book anew: the fences kept on disk
// are all it has of the last one's, and no verdict until the agent
// judges again.
func (r *ilRun) restartBook() {
	r.reportAll() // before the new agent reads kubelet: it has no live holds
	for key, f := range r.m.fences {
		if f.Layout == nil {
			delete(r.m.fences, key)
		}
	}
	r.m.unhealthy, r.m.away = map[string]string{}, map[string]bool{}
	r.w.startBook()
	r.read(r.w.book.Snapshot())
}

func (r *ilRun) kubeletDownUp() string {
	r.reportAll()
	if r.m.kubeletDown {
		r.w.kubeletUp(false)
		r.m.kubeletDown = false
		return "ok, up"
	}
	r.w.kubeletDown()
	r.m.kubeletDown, r.m.kubeletStarting, r.m.seen = true, false, false
	return "ok, down"
}

// kubeletRestart is kubelet restarting, answering without its pods until
// it has loaded them, which the step's next turn does.
func (r *ilRun) kubeletRestart() string {
	r.reportAll()
	switch {
	case r.m.kubeletDown:
		return "nothing: kubelet is down"
	case r.m.kubeletStarting:
		r.w.kubeletStarted()
		return "ok, started"
	}
	r.w.kubeletDown()
	r.w.kubeletUp(true)
	return "ok, starting"
}

func (r *ilRun) tearMend() string {
	r.m.torn = !r.m.torn
	r.w.tearOther(r.m.torn)
	if r.m.torn {
		r.m.seen = false
		return "ok, torn"
	}
	return "ok, mended"
}

func (r *ilRun) badRecord() string {
	r.m.badRecord = !r.m.badRecord
	if r.m.badRecord {
		r.m.seen = false
		r.w.writeRecord("bad", nil)
		return "ok, unreadable"
	}
	r.w.removeRecord("bad")
	return "ok, gone"
}
