package ledger_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/test/soakenv"
)

// The interleaving test's knobs: `make test` runs the defaults, `make
// soak-ledger` sets them.
const (
	ilSeedEnv     = "HWNET_LEDGER_SEED"
	ilStepsEnv    = "HWNET_LEDGER_STEPS"
	ilDefaultSeed = 1
	// ilDefaultSteps take a few seconds.
	ilDefaultSteps = 5000
	// ilSequenceLen is how many steps run between two drains back to the
	// baseline; a sequence is replayed alone by its seed.
	ilSequenceLen = 40
)

// TestBookInterleavings is the Book's guarantee under random
// interleavings of every hand-out and give-back and every fault of its
// sources, far more of them than TestHandout (agent/) runs through the
// whole agent: kubelet's allocations (some refused after Allocate, some of
// a renamed pool), DRA prepare and unprepare, CNI ADD (for a pod's own
// devices, through a claim, or for devices the sandbox has no right to)
// and DEL, VF layout and mode switch fences, verdicts, the agent
// restarting, kubelet going away, restarting (answering without its pods
// while it starts) and coming back, another driver's checkpoint torn, an
// unreadable CNI record, a teardown leaving its VF resets pending (the
// shim's, with the agent away; a failed reset's) and the resets done,
// the Book's own reads and Watch's polls with its second reader (which
// asks kubelet only now and then), time passing. A model of who holds
// what checks after every step that no device has two owners, that
// nothing fenced, unhealthy or withheld by a pending reset was handed
// out, that no device whose netdev is away went where no sandbox and no
// earlier hand-out of its new owner explains it, that nothing was handed
// out once the Book had read a source it could not, and that the Book
// forgets no hold; after
// each sequence everything is given back and the Book must be at the
// baseline. A failure prints the seed and steps:
// `make soak-ledger SEED=<seed> STEPS=40` replays it.
func TestBookInterleavings(t *testing.T) {
	seed, steps := ilParams(t)
	m := newILModel()
	w := newILWorld(t, m)
	start, done := time.Now(), 0
	for seq := uint64(0); done < steps; seq++ {
		n := min(ilSequenceLen, steps-done)
		r := &ilRun{w: w, m: m, seed: seed + seq, rng: rand.New(rand.NewPCG(seed+seq, seed+seq))}
		r.sequence(n)
		done += n
	}
	took := time.Since(start)
	t.Logf("%d steps from seed %d in %s (%.0f steps/s, drains included)", done, seed, took.Round(time.Millisecond), float64(done)/took.Seconds())
}

func ilParams(t *testing.T) (uint64, int) {
	steps := ilDefaultSteps
	if testing.Short() {
		steps = 400
	}
	return soakenv.Params(t, ilSeedEnv, ilStepsEnv, ilDefaultSeed, steps)
}

// ilModel is what the test did: who holds what in truth, and the faults
// in force.
type ilModel struct {
	pods      map[string]*ilPod
	claims    map[string]*ilClaim
	sandboxes map[string]*ilSandbox
	fences    map[string]ledger.Fence
	unhealthy map[string]string
	// away are the devices whose netdev is not in the node's namespace.
	away map[string]bool
	// resets are the devices whose VF reset is pending.
	resets map[string]bool
	// kubeletDown, kubeletStarting, torn and badRecord are the sources'
	// faults; seen says the Book read the sources since one began.
	kubeletDown, kubeletStarting, torn, badRecord, seen bool
	// kubeletSince is when kubelet started, on the Book's clock.
	kubeletSince time.Time
	// gone are the names of pods kubelet let go, which a StatefulSet may
	// give a new pod.
	gone  []string
	names int
}

type ilPod struct {
	uid, resource string
	devices       []string
	// unreported is a pod kubelet allocated for and does not report yet.
	unreported bool
}

type ilClaim struct {
	uid, podUID, resource string
	devices               []string
}

// ilSandbox is a CNI attachment: owner is the pod or claim whose devices
// it attached, "" for a sandbox that took devices of its own.
type ilSandbox struct {
	pod, podUID, resource, claimUID, owner string
	devices                                []string
}

func newILModel() *ilModel {
	return &ilModel{pods: map[string]*ilPod{}, claims: map[string]*ilClaim{}, sandboxes: map[string]*ilSandbox{},
		fences: map[string]ledger.Fence{}, unhealthy: map[string]string{}, away: map[string]bool{}, resets: map[string]bool{}}
}

// podUID and podRunning are the node's pods cache, as the agent's.
func (m *ilModel) podUID(namespace, name string) string {
	if p, ok := m.pods[name]; ok && namespace == ilNS {
		return p.uid
	}
	return ""
}

func (m *ilModel) podRunning(namespace, name, uid string) bool {
	p, ok := m.pods[name]
	return ok && namespace == ilNS && (uid == "" || uid == p.uid)
}

// owners are each device's owners in truth: a pod (its allocation and
// its sandbox), a claim (and its pod's sandbox), a sandbox on its own.
func (m *ilModel) owners() map[string][]string {
	out := map[string][]string{}
	add := func(owner string, devices []string) {
		for _, d := range devices {
			if !slices.Contains(out[d], owner) {
				out[d] = append(out[d], owner)
			}
		}
	}
	for name, p := range m.pods {
		add("pod "+name, p.devices)
	}
	for name, c := range m.claims {
		add("claim "+name, c.devices)
	}
	for id, sb := range m.sandboxes {
		add(cmpOr(sb.owner, "sandbox "+id), sb.devices)
	}
	return out
}

// inSandbox reports whether a sandbox's attachment has the device.
func (m *ilModel) inSandbox(d string) bool {
	for _, sb := range m.sandboxes {
		if slices.Contains(sb.devices, d) {
			return true
		}
	}
	return false
}

// faulty says which source the Book cannot read now, "" when it reads
// them all.
func (m *ilModel) faulty() string {
	switch {
	case m.kubeletDown:
		return "kubelet down"
	case m.torn:
		return "another driver's checkpoint torn"
	case m.badRecord:
		return "a CNI record unreadable"
	}
	return ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (m *ilModel) name(prefix string) string {
	m.names++
	return fmt.Sprintf("%s%d", prefix, m.names)
}

// ilRun is one sequence.
type ilRun struct {
	w    *ilWorld
	m    *ilModel
	seed uint64
	rng  *rand.Rand
	log  []string
}

type ilStep struct {
	name   string
	weight int
	run    func(*ilRun) string
}

func ilSteps() []ilStep {
	return []ilStep{
		{"allocate", 8, (*ilRun).allocate},
		{"kubelet-reports", 3, (*ilRun).report},
		{"delete-pod", 4, (*ilRun).deletePod},
		{"prepare", 8, (*ilRun).prepare},
		{"unprepare", 4, (*ilRun).unprepare},
		{"add", 8, (*ilRun).add},
		{"del", 5, (*ilRun).del},
		{"fence", 3, (*ilRun).fence},
		{"unfence", 3, (*ilRun).unfence},
		{"judge", 2, (*ilRun).judge},
		{"poll", 4, (*ilRun).poll},
		{"watch-poll", 4, (*ilRun).watchPoll},
		{"time", 2, (*ilRun).passTime},
		{"agent-restart", 2, (*ilRun).agentRestart},
		{"kubelet-down-up", 2, (*ilRun).kubeletDownUp},
		{"kubelet-restart", 2, (*ilRun).kubeletRestart},
		{"checkpoint-tear-mend", 1, (*ilRun).tearMend},
		{"record-bad-mend", 1, (*ilRun).badRecord},
		{"del-reset-pending", 3, (*ilRun).shimDel},
		{"reset-done", 3, (*ilRun).resetDone},
	}
}

func (r *ilRun) sequence(n int) {
	steps := ilSteps()
	total := 0
	for _, st := range steps {
		total += st.weight
	}
	for i := range n {
		k := r.rng.IntN(total)
		st := steps[len(steps)-1]
		for _, s := range steps {
			if k -= s.weight; k < 0 {
				st = s
				break
			}
		}
		r.log = append(r.log, fmt.Sprintf("%3d %s: did not finish", i+1, st.name))
		out := st.run(r)
		r.log[len(r.log)-1] = fmt.Sprintf("%3d %s: %s", i+1, st.name, out)
		r.checkOwners()
		r.checkNothingForgotten()
	}
	r.drain()
}

// fail reports a broken guarantee with the sequence to replay.
func (r *ilRun) fail(format string, args ...any) {
	r.w.t.Helper()
	r.w.t.Fatalf("VIOLATION: %s\nreplay: make soak-ledger SEED=%d STEPS=%d\nsteps:\n%s", fmt.Sprintf(format, args...),
		r.seed, ilSequenceLen, strings.Join(r.log, "\n"))
}

func (r *ilRun) pick(xs []string) string { return xs[r.rng.IntN(len(xs))] }

// somePoolDevices are one or two devices of the pool.
func (r *ilRun) somePoolDevices(res string) []string {
	pool := ilPool(res)
	out := []string{r.pick(pool)}
	if r.rng.IntN(3) == 0 {
		if d := r.pick(pool); d != out[0] {
			out = append(out, d)
		}
	}
	return out
}

// reserve asks the Book and checks a grant against the truth: the
// devices had no owner but owner (or, for kubelet's, a pod of the same
// resource, which kubelet keeps apart itself), none is fenced or judged
// unhealthy, and no source the Book has seen unreadable is still so.
func (r *ilRun) reserve(h ledger.Holder, owner string, devices []string) error {
	owners := r.m.owners()
	err := r.w.book.Reserve(context.Background(), ledger.Request{Devices: devices, Holder: h})
	if err != nil {
		return err
	}
	if f := r.m.faulty(); f != "" && r.m.seen {
		r.fail("%v went to %s while %s, which the Book had read", devices, owner, f)
	}
	for _, d := range devices {
		for _, o := range owners[d] {
			if o != owner {
				r.fail("%s went to %s while %s owned it", d, owner, o)
			}
		}
		for _, f := range r.m.fences {
			if fenceCovers(f, d) {
				r.fail("%s went to %s while %s fenced it", d, owner, f.Key)
			}
		}
		if why, bad := r.m.unhealthy[d]; bad {
			r.fail("%s went to %s while unhealthy: %s", d, owner, why)
		}
		if r.m.away[d] && !slices.Contains(owners[d], owner) && !r.m.inSandbox(d) {
			r.fail("%s went to %s while its netdev was away and no sandbox had it", d, owner)
		}
		if r.m.resets[d] {
			r.fail("%s went to %s while its VF settings reset was pending", d, owner)
		}
	}
	return nil
}

func fenceCovers(f ledger.Fence, d string) bool {
	return f.PF != "" && strings.HasPrefix(d, f.PF[:7]) || slices.Contains(f.Devices, d)
}

// checkOwners: no device has two owners.
func (r *ilRun) checkOwners() {
	for d, owners := range r.m.owners() {
		if len(owners) > 1 {
			r.fail("%s has two owners: %v", d, owners)
		}
	}
}

// checkNothingForgotten: a Book that says it read every source knows
// every hold there is (a refused allocation aside, which it may keep a
// while).
func (r *ilRun) checkNothingForgotten() {
	l := r.w.book.Snapshot()
	if !l.Complete() {
		return
	}
	for name, p := range r.m.pods {
		r.knows(l, "pod "+name, p.devices, func(h ledger.Holder) bool { return h.Kind == ledger.Pod && h.Resource == p.resource })
	}
	for name, c := range r.m.claims {
		r.knows(l, "claim "+name, c.devices, func(h ledger.Holder) bool { return h.Kind == ledger.Claim && h.UID == c.uid })
	}
	for id, sb := range r.m.sandboxes {
		r.knows(l, "sandbox "+id, sb.devices, func(h ledger.Holder) bool { return h.Kind == ledger.Container && h.Container == id })
	}
}

func (r *ilRun) knows(l *ledger.Ledger, owner string, devices []string, is func(ledger.Holder) bool) {
	for _, d := range devices {
		if !slices.ContainsFunc(l.Holders(d), is) {
			r.fail("the Book says it read every source but does not know %s holds %s (holders %v)", owner, d, l.Holders(d))
		}
	}
}

// drain gives everything back, mends every fault and checks the
// baseline: the Book knows every source, holds nothing, fences nothing,
// and hands every device out.
func (r *ilRun) drain() {
	w, m := r.w, r.m
	if m.kubeletDown || m.kubeletStarting {
		if m.kubeletDown {
			w.kubeletUp(false)
			m.kubeletDown = false
		}
		w.kubeletStarted()
	}
	for _, id := range slices.Sorted(maps.Keys(m.sandboxes)) {
		r.delSandbox(id)
	}
	for _, name := range slices.Sorted(maps.Keys(m.claims)) {
		r.unprepareClaim(name)
	}
	for _, name := range slices.Sorted(maps.Keys(m.pods)) {
		r.forgetPod(name)
	}
	m.torn, m.badRecord = false, false
	w.tearOther(false)
	w.removeRecord("bad")
	for _, key := range slices.Sorted(maps.Keys(m.fences)) {
		r.lift(key)
	}
	m.unhealthy, m.away = map[string]string{}, map[string]bool{}
	w.book.Judge(ledger.Verdicts{})
	r.drainResets()
	// Past a pending allocation's grace and a starting kubelet's settle,
	// from when the Book saw kubelet start.
	w.book.Refresh(context.Background())
	w.now = w.now.Add(kubeletSettle + time.Second)
	l := w.book.Refresh(context.Background())
	if !l.Complete() || len(l.Fences()) > 0 {
		r.fail("drained: unknown %v, fences %v", l.Unknown, l.Fences())
	}
	r.drainedFree(l)
}

// drainedFree: every device is free and can be handed out.
func (r *ilRun) drainedFree(l *ledger.Ledger) {
	all := append(ilVFs(ilPFA), ilVFs(ilPFB)...)
	for _, d := range all {
		if hs := l.Holders(d); len(hs) > 0 {
			r.fail("drained: %s still held by %v", d, hs)
		}
	}
	probe := ledger.Holder{Kind: ledger.Claim, Namespace: ilNS, Name: "probe", UID: "probe-uid"}
	if err := r.w.book.Reserve(context.Background(), ledger.Request{Devices: all, Holder: probe}); err != nil {
		r.fail("drained: %v", err)
	}
	r.w.book.Release(context.Background(), probe)
}
