package agent_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/soakenv"
)

// The hand-out soak's knobs: `make test` runs the defaults, `make soak`
// sets them.
const (
	seedEnv  = "HWNET_HANDOUT_SEED"
	stepsEnv = "HWNET_HANDOUT_STEPS"
	// skipEnv names steps, comma-separated, a run leaves out: to soak
	// the rest while a bug one of them finds is being fixed.
	skipEnv = "HWNET_HANDOUT_SKIP"
	// forEnv, a duration, ends the run with the first sequence that ends
	// past it, so that a soak bounded in time ends with its summary.
	forEnv       = "HWNET_HANDOUT_FOR"
	defaultSeed  = 1
	defaultSteps = 60
	// sequenceLen is how many steps run between two drains back to the
	// node's baseline; a sequence is replayed alone by its seed.
	sequenceLen = 30
)

// TestHandout is issue 41's guarantee under random interleavings: one
// owner per device, and nothing fenced, unknown or unhealthy handed out,
// whatever the order of kubelet's Allocate, DRA prepare and unprepare,
// CNI ADD and DEL, pool mode switches, VF layout changes, agent and
// kubelet restarts, netdevs vanishing and checkpoints torn. The real
// agent serves a virtual node; the test plays kubelet, the scheduler, the
// runtime and the admin, keeps its own record of every hand-out, checks
// the invariants after every step and, after each sequence, drains
// everything and waits for the node's baseline. A failure prints the
// sequence's seed and steps: `make soak SEED=<seed> STEPS=<n>` replays it.
func TestHandout(t *testing.T) {
	seed, steps := soakParams(t)
	run := stepsRun(t)
	w := newWorld(t)
	s := &soak{w: w, layout: baseLayout(), m: newModel(), outcomes: map[string]int{}, detail: steps <= 10*sequenceLen,
		steps: run}
	t.Cleanup(func() { s.report() })
	w.startAgent(s.layout)
	s.waitBaseline()
	s.start = time.Now()
	until := soakUntil(t, s.start)
	for seq := uint64(0); s.done < steps && time.Now().Before(until); seq++ {
		s.sequence(seed+seq, min(sequenceLen, steps-s.done))
	}
	took := time.Since(s.start)
	t.Logf("%d steps from seed %d in %s (%.1f steps/s, drains included); outcomes: %v",
		s.done, seed, took.Round(time.Millisecond), float64(s.done)/took.Seconds(), s.outcomes)
	s.checkLive(s.done)
}

// soakParams are the seed and step count from the environment, or the
// defaults.
func soakParams(t *testing.T) (uint64, int) {
	return soakenv.Params(t, seedEnv, stepsEnv, defaultSeed, defaultSteps)
}

// soakUntil is when the run ends, at the latest: start plus forEnv, or
// never.
func soakUntil(t *testing.T, start time.Time) time.Time {
	v := os.Getenv(forEnv)
	if v == "" {
		return start.Add(100 * 365 * 24 * time.Hour)
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", forEnv, v, err)
	}
	return start.Add(d)
}

// stepsRun are the steps a run takes: all but those skipEnv names.
func stepsRun(t *testing.T) []step {
	skip := map[string]bool{}
	for name := range strings.SplitSeq(os.Getenv(skipEnv), ",") {
		if name != "" {
			skip[strings.TrimSpace(name)] = true
		}
	}
	var out []step
	for _, st := range soakSteps() {
		if !skip[st.name] {
			out = append(out, st)
		}
		delete(skip, st.name)
	}
	if len(skip) > 0 || len(out) == 0 {
		t.Fatalf("%s=%q: unknown steps %v, or none left", skipEnv, os.Getenv(skipEnv), slices.Sorted(maps.Keys(skip)))
	}
	return out
}

// model is the test's own record of what it handed out, through which
// actor, and the faults it made.
type model struct {
	pods      map[string]*dpPod
	claims    map[string]*claimRec
	sandboxes map[string]*sandbox
	// vanished are the netdevs moved out of the node, by device;
	// pf1Down says PF 1's link is down, which takes its VFs' health.
	vanished map[string]string
	pf1Down  bool
	// torn says another driver's checkpoint is torn: unreadable.
	torn  bool
	names int
}

func newModel() model {
	return model{pods: map[string]*dpPod{}, claims: map[string]*claimRec{}, sandboxes: map[string]*sandbox{}, vanished: map[string]string{}}
}

// dpPod is a pod kubelet allocated devices to through a device plugin.
type dpPod struct {
	pod      *corev1.Pod
	resource string
	devices  []string
	sandbox  string
}

// claimRec is a prepared claim and the pod it is reserved for.
type claimRec struct {
	pod     *corev1.Pod
	uid     string
	devices []string
	sandbox string
}

// sandbox is a pod sandbox the CNI ADD attached devices to.
type sandbox struct {
	pod     *corev1.Pod
	owner   string
	devices []string
}

func podOwner(name string) string   { return "pod " + name }
func claimOwner(name string) string { return "claim " + name }

// owners are each device's owners: a pod's allocation and its own
// sandbox's attachment are one, a claim and its pod's attachment are one.
func (m *model) owners() map[string][]string {
	out := map[string][]string{}
	add := func(owner string, devices []string) {
		for _, d := range devices {
			if !slices.Contains(out[d], owner) {
				out[d] = append(out[d], owner)
			}
		}
	}
	for name, p := range m.pods {
		add(podOwner(name), p.devices)
	}
	for name, c := range m.claims {
		add(claimOwner(name), c.devices)
	}
	for _, sb := range m.sandboxes {
		add(sb.owner, sb.devices)
	}
	return out
}

// soak runs sequences of steps against a world.
type soak struct {
	w      *world
	rng    *rand.Rand
	layout soakLayout
	m      model
	seed   uint64
	// log is the current sequence's steps as they ran.
	log      []string
	outcomes map[string]int
	// detail logs each sequence's steps with -v, else one line per
	// sequence; done counts the steps run since start.
	detail bool
	done   int
	start  time.Time
	steps  []step
}

// step is one thing one actor does.
type step struct {
	name   string
	weight int
	run    func(*soak) string
	// undoes, for a fault's step, reports whether the fault is in force:
	// then the step undoes it, and is made likelier, so that faults come
	// and go rather than stand for most of a sequence.
	undoes func(*soak) bool
}

// faultBoost is how much likelier a fault's step is while it stands.
const faultBoost = 8

func (st step) weightNow(s *soak) int {
	if st.undoes != nil && st.undoes(s) {
		return st.weight * faultBoost
	}
	return st.weight
}

func soakSteps() []step {
	return []step{
		{"allocate", 8, (*soak).allocate, nil},
		{"delete-pod", 4, (*soak).deletePod, nil},
		{"prepare", 7, (*soak).prepare, nil},
		{"unprepare", 4, (*soak).unprepare, nil},
		{"add", 7, (*soak).add, nil},
		{"del", 4, (*soak).del, nil},
		{"mode-switch", 3, (*soak).modeSwitch, nil},
		{"vf-layout", 2, (*soak).vfLayout, nil},
		{"agent-restart", 1, (*soak).agentRestart, nil},
		{"agent-restart-blind", 1, (*soak).agentRestartBlind, nil},
		{"kubelet-restart", 1, (*soak).kubeletRestart, nil},
		{"kubelet-down-up", 1, (*soak).kubeletDownUp, func(s *soak) bool { return s.w.podres == nil }},
		{"netdev-vanish-back", 2, (*soak).netdevVanishBack, func(s *soak) bool { return len(s.m.vanished) > 0 }},
		{"pf-link-down-up", 1, (*soak).pfLinkDownUp, func(s *soak) bool { return s.m.pf1Down }},
		{"checkpoint-tear-mend", 1, (*soak).checkpointTearMend, func(s *soak) bool { return s.m.torn }},
	}
}

// sequence runs n random steps from seed, checking the invariants after
// each, then drains the node back to its baseline.
func (s *soak) sequence(seed uint64, n int) {
	s.seed, s.rng, s.log = seed, rand.New(rand.NewPCG(seed, seed)), nil
	for i := range n {
		st := s.pick(s.steps)
		held, changes := s.m.owners(), s.w.layoutChanges()
		start := time.Now()
		// Logged before it runs: a step the test fails in is the last.
		s.log = append(s.log, fmt.Sprintf("%3d %s: did not finish", i+1, st.name))
		out := st.run(s)
		s.log[len(s.log)-1] = fmt.Sprintf("%3d %s (%s): %s", i+1, st.name, time.Since(start).Round(time.Millisecond), out)
		s.outcomes[st.name+" "+strings.Trim(strings.Fields(out)[0], ",:")]++
		s.checkOwners()
		s.checkLayout(held, changes)
	}
	start := time.Now()
	s.drain()
	s.waitBaseline()
	s.log = append(s.log, fmt.Sprintf("    drained to the baseline (%s)", time.Since(start).Round(time.Millisecond)))
	s.done += n
	switch {
	case !testing.Verbose():
	case s.detail:
		s.w.t.Logf("sequence of seed %d:\n%s", seed, strings.Join(s.log, "\n"))
	default:
		s.w.t.Logf("sequence of seed %d passed: %d steps done, %.1f steps/s", seed, s.done, float64(s.done)/time.Since(s.start).Seconds())
	}
}

func (s *soak) pick(steps []step) step {
	total := 0
	for _, st := range steps {
		total += st.weightNow(s)
	}
	n := s.rng.IntN(total)
	for _, st := range steps {
		if n -= st.weightNow(s); n < 0 {
			return st
		}
	}
	return steps[len(steps)-1]
}

// report prints, for a failed test, how to replay the sequence and what
// it did.
func (s *soak) report() {
	if !s.w.t.Failed() {
		return
	}
	skip := ""
	if v := os.Getenv(skipEnv); v != "" {
		skip = " SKIP=" + v
	}
	s.w.t.Logf("hand-out soak failed in the sequence of seed %d; replay it with\n  make soak SEED=%d STEPS=%d%s\nsteps:\n%s\nagent log (tail):\n%s",
		s.seed, s.seed, sequenceLen, skip, strings.Join(s.log, "\n"), s.w.logs)
}

// violation fails the test for a broken guarantee.
func (s *soak) violation(format string, args ...any) {
	s.w.t.Helper()
	s.w.t.Fatalf("VIOLATION: "+format, args...)
}

// checkOwners: no device has two owners.
func (s *soak) checkOwners() {
	for d, owners := range s.m.owners() {
		if len(owners) > 1 {
			s.violation("device %s has two owners: %v", d, owners)
		}
	}
}

// onPF0 reports whether the device is PF 0 or one of its VFs: on the
// default virtual node they are the functions on bus 3b.
func onPF0(id string) bool { return strings.HasPrefix(id, "0000:3b:") }

// checkLayout: a VF layout change of PF 0 during a step while one of
// its VFs was held throughout took the VF from its holder.
func (s *soak) checkLayout(before map[string][]string, changes float64) {
	if s.w.layoutChanges() == changes {
		return
	}
	after := s.m.owners()
	for d, owners := range before {
		for _, o := range owners {
			if onPF0(d) && slices.Contains(after[d], o) {
				s.violation("PF 0's VF layout changed while %s held %s", o, d)
			}
		}
	}
}

// guards are why each device must not be handed out now, as the test
// knows it: a VF layout fence file on its PF, a source of holders the
// test made unreadable while the agent reports it unknown, or its netdev
// gone or its PF's link down while the agent lists it not offered.
func (s *soak) guards(res string, viaDRA bool, ids []string) map[string][]string {
	out := map[string][]string{}
	fences, err := ledger.LoadFences(s.w.opts.FenceDir)
	if err != nil {
		s.w.t.Fatalf("fence files: %v", err)
	}
	unknown := s.unknownGuard()
	listed := map[string]offer{}
	for _, o := range s.w.offers(res, viaDRA) {
		listed[o.id] = o
	}
	for _, id := range ids {
		for _, f := range fences {
			if f.PF != "" && onPF0(f.PF) == onPF0(id) && strings.HasPrefix(f.Key, "vf-layout/") {
				out[id] = append(out[id], "fenced by "+f.Key)
			}
		}
		if unknown != "" {
			out[id] = append(out[id], unknown)
		}
		if o, ok := listed[id]; ok && !o.offered {
			out[id] = append(out[id], s.impaired(id, o.why)...)
		}
	}
	return out
}

// impaired is what the test did to a device that takes its health: its
// netdev moved away, its PF's link down.
func (s *soak) impaired(id, listed string) []string {
	var out []string
	if s.m.vanished[id] != "" {
		out = append(out, "netdev vanished, listed "+listed)
	}
	if s.m.pf1Down && !onPF0(id) {
		out = append(out, "PF 1's link down, listed "+listed)
	}
	return out
}

// unknownGuard names the source of holders the test made unreadable,
// "" unless the agent reports a source unknown. The test makes one
// unreadable at a time, so the agent's count tells it is that one.
func (s *soak) unknownGuard() string {
	what := ""
	switch {
	case s.w.podres == nil:
		what = "kubelet's PodResources down"
	case s.m.torn:
		what = "a torn DRA checkpoint"
	}
	if what == "" || s.w.unknownSources() == 0 {
		return ""
	}
	return what + ", and the agent reports a source unknown"
}

// handedOut checks a hand-out that succeeded against the guards before
// and after it: one that stood the whole call must have refused it.
func (s *soak) handedOut(what string, ids []string, before, after map[string][]string) {
	for _, id := range ids {
		for _, why := range before[id] {
			if slices.Contains(after[id], why) {
				s.violation("%s handed out %s while %s", what, id, why)
			}
		}
	}
}

// nextName is a name no pod or claim had.
func (s *soak) nextName(prefix string) string {
	s.m.names++
	return fmt.Sprintf("%s%d-%d", prefix, s.seed, s.m.names)
}

// pool is a random pool served through the DRA driver (viaDRA) or its
// device plugin, false when there is none.
func (s *soak) pool(viaDRA bool) (string, bool) {
	var out []string
	for _, res := range soakPools() {
		if s.layout.dra[res] == viaDRA {
			out = append(out, res)
		}
	}
	if len(out) == 0 {
		return "", false
	}
	return out[s.rng.IntN(len(out))], true
}

// choose takes 1-2 of the offered devices or, as an actor with a stale
// view would, one the agent withholds: one another owner holds, one the
// test impaired, or one withheld for another reason, each sometimes.
func (s *soak) choose(offers []offer, taken func(string) bool) (ids []string, stale bool) {
	var ok []string
	withheld := make([][]string, 3) // held, impaired, other
	owners := s.m.owners()
	for _, o := range offers {
		switch {
		case taken(o.id):
		case o.offered:
			ok = append(ok, o.id)
		case len(owners[o.id]) > 0:
			withheld[0] = append(withheld[0], o.id)
		case len(s.impaired(o.id, "")) > 0:
			withheld[1] = append(withheld[1], o.id)
		default:
			withheld[2] = append(withheld[2], o.id)
		}
	}
	slices.Sort(ok)
	for _, l := range withheld {
		slices.Sort(l)
	}
	// One time in eight one held, in three one impaired (impairments
	// are brief), in eight another; always one when none is offered.
	kind := -1
	switch r := s.rng.IntN(24); {
	case r < 3:
		kind = 0
	case r < 11:
		kind = 1
	case r < 14:
		kind = 2
	}
	if kind >= 0 && len(withheld[kind]) > 0 {
		return []string{withheld[kind][s.rng.IntN(len(withheld[kind]))]}, true
	}
	if all := slices.Concat(withheld...); len(ok) == 0 && len(all) > 0 {
		return []string{all[s.rng.IntN(len(all))]}, true
	}
	s.rng.Shuffle(len(ok), func(i, j int) { ok[i], ok[j] = ok[j], ok[i] })
	return ok[:min(len(ok), 1+s.rng.IntN(2))], false
}

func staleNote(stale bool) string {
	if stale {
		return " (withheld, a stale view)"
	}
	return ""
}

// createPod creates a pod bound to the node whose annotation selects the
// pool's network once per device.
func (s *soak) createPod(name, res string, devices int) *corev1.Pod {
	nets := strings.TrimSuffix(strings.Repeat(nadName(res)+",", devices), ",")
	return s.w.api.CreatePod(s.w.t, soakNamespace, name, soakNode, map[string]string{"k8s.v1.cni.cncf.io/networks": nets})
}

func (s *soak) deleteObject(kind, name string) {
	ctx, zero := context.Background(), int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	var err error
	if kind == "pod" {
		err = s.w.api.Client().CoreV1().Pods(soakNamespace).Delete(ctx, name, opts)
	} else {
		err = s.w.api.Client().ResourceV1().ResourceClaims(soakNamespace).Delete(ctx, name, opts)
	}
	if err != nil {
		s.w.t.Fatalf("delete %s %s: %v", kind, name, err)
	}
}

// allocate is kubelet starting a pod with devices of a device plugin
// pool: it picks them from the plugin's latest list, never one its own
// pods hold, and records the pod in PodResources once Allocate succeeds.
func (s *soak) allocate() string {
	res, ok := s.pool(false)
	if !ok {
		return "nothing: no device plugin pool"
	}
	ids, stale := s.choose(s.w.offers(res, false), func(id string) bool { return s.kubeletHolds(res, id) })
	if len(ids) == 0 {
		return "nothing: no device listed in " + res
	}
	pod := s.createPod(s.nextName("dp"), res, len(ids))
	before := s.guards(res, false, ids)
	ctx, cancel := context.WithTimeout(context.Background(), soakReact)
	_, err := s.w.kubelet.Allocate(ctx, res, ids...)
	cancel()
	after := s.guards(res, false, ids)
	if err != nil {
		s.deleteObject("pod", pod.Name)
		return fmt.Sprintf("refused %s %v%s: %v", res, ids, staleNote(stale), err)
	}
	s.handedOut("Allocate of "+pod.Name, ids, before, after)
	p := &dpPod{pod: pod, resource: res, devices: ids}
	s.m.pods[pod.Name] = p
	if s.w.podres != nil {
		s.w.podres.SetPod(soakNamespace, pod.Name, res, ids...)
	}
	return fmt.Sprintf("ok %s got %s %v%s", pod.Name, res, ids, staleNote(stale))
}

// kubeletHolds reports whether one of kubelet's pods has the device of
// the resource: kubelet keeps its allocations apart itself.
func (s *soak) kubeletHolds(res, id string) bool {
	for _, p := range s.m.pods {
		if p.resource == res && slices.Contains(p.devices, id) {
			return true
		}
	}
	return false
}

// pickKey is one of the map's keys, false when it is empty.
func pickKey[V any](s *soak, m map[string]V) (string, bool) {
	if len(m) == 0 {
		return "", false
	}
	keys := slices.Sorted(maps.Keys(m))
	return keys[s.rng.IntN(len(keys))], true
}

// deletePod is a device plugin pod ending: the runtime tears its sandbox
// down, kubelet forgets its allocation.
func (s *soak) deletePod() string {
	name, ok := pickKey(s, s.m.pods)
	if !ok {
		return "nothing: no device plugin pod"
	}
	s.forget(name)
	return "ok " + name
}

func (s *soak) forget(name string) {
	p := s.m.pods[name]
	if p.sandbox != "" {
		s.tearDown(p.sandbox)
	}
	delete(s.m.pods, name)
	if s.w.podres != nil {
		s.w.podres.SetPod(soakNamespace, name, p.resource)
	}
	s.deleteObject("pod", name)
}

// prepare is the scheduler allocating a claim of a DRA pool's published
// devices, reserved for a pod, and kubelet preparing it: usually devices
// without a taint, sometimes a tainted one, as for a claim that
// tolerates the taint.
func (s *soak) prepare() string {
	res, ok := s.pool(true)
	if !ok {
		return "nothing: no DRA pool"
	}
	ids, tainted := s.choose(s.w.offers(res, true), s.claimed)
	if len(ids) == 0 {
		return "nothing: no device published in " + res
	}
	name := s.nextName("cl")
	pod := s.createPod(name, res, len(ids))
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = dra.DeviceName(id)
	}
	claim := s.w.api.AllocatedClaim(s.w.t, kubeapi.Allocation{Namespace: soakNamespace, Name: name, Class: "hwnet",
		Driver: dra.DefaultDriverName, Pool: soakNode, Devices: names, ReservedFor: []*corev1.Pod{pod}})
	uid := string(claim.UID)
	before := s.guards(res, true, ids)
	err := s.nodePrepare(name, uid)
	after := s.guards(res, true, ids)
	if err != nil {
		s.deleteObject("claim", name)
		s.deleteObject("pod", name)
		return fmt.Sprintf("refused %s %v%s: %v", res, ids, staleNote(tainted), err)
	}
	s.handedOut("prepare of claim "+name, ids, before, after)
	s.m.claims[name] = &claimRec{pod: pod, uid: uid, devices: ids}
	return fmt.Sprintf("ok claim %s got %s %v%s", name, res, ids, staleNote(tainted))
}

// claimed reports whether a claim the test keeps was allocated the
// device: the scheduler allocates a device to one claim at a time.
func (s *soak) claimed(id string) bool {
	for _, c := range s.m.claims {
		if slices.Contains(c.devices, id) {
			return true
		}
	}
	return false
}

// nodePrepare calls NodePrepareResources for one claim, as kubelet does.
func (s *soak) nodePrepare(name, uid string) error {
	ctx, cancel := context.WithTimeout(context.Background(), soakReact)
	defer cancel()
	claims := []*drapb.Claim{{Namespace: soakNamespace, Name: name, Uid: uid}}
	resp, err := s.w.running.dra.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: claims})
	if err != nil {
		return err
	}
	if e := resp.Claims[uid].GetError(); e != "" {
		return fmt.Errorf("%s", e)
	}
	return nil
}

// unprepare is a claim's pod ending: the runtime tears its sandbox down,
// kubelet unprepares the claim, and the claim is deleted.
func (s *soak) unprepare() string {
	name, ok := pickKey(s, s.m.claims)
	if !ok {
		return "nothing: no claim"
	}
	s.release(name)
	return "ok claim " + name
}

func (s *soak) release(name string) {
	c := s.m.claims[name]
	if c.sandbox != "" {
		s.tearDown(c.sandbox)
	}
	ctx, cancel := context.WithTimeout(context.Background(), soakReact)
	defer cancel()
	claims := []*drapb.Claim{{Namespace: soakNamespace, Name: name, Uid: c.uid}}
	resp, err := s.w.running.dra.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: claims})
	if err == nil {
		if e := resp.Claims[c.uid].GetError(); e != "" {
			err = fmt.Errorf("%s", e)
		}
	}
	if err != nil {
		s.w.t.Fatalf("unprepare of claim %s: %v", name, err)
	}
	delete(s.m.claims, name)
	s.deleteObject("claim", name)
	s.deleteObject("pod", name)
}
