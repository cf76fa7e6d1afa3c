package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/cnicache"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/delegate"
	"github.com/hwnet-io/hwnet/internal/events"
)

// Defaults of the CNI side's own garbage collection of attachments.
const (
	DefaultCRISocket         = "/run/containerd/containerd.sock"
	DefaultReconcileInterval = time.Minute
	// reconcileGrace spares a record whose ADD finished this recently: the
	// runtime lists a sandbox only once its network is set up.
	reconcileGrace = time.Minute
)

// reconciler is the runtime GC: it tears down the attachments of
// sandboxes the runtime no longer has (delegate.Reconcile), so no failed
// or interrupted sandbox leaks a record, device-info files, IP leases or
// a VF, whatever the runtime does; but only on an answer of the runtime
// that agrees with the API server's view of the node's pods (believe).
type reconciler struct {
	d   *delegate.Delegator
	o   Options
	log *slog.Logger
	// client lists the node's pods; nil checks the runtime's answer
	// against the records alone.
	client kubernetes.Interface
	events *events.Node
	// distrusted is set while the runtime's answers are not believed,
	// so that a spell of them is said once.
	distrusted bool
	// runtime is the CRI client, made at the first ask.
	runtime *runtimeClient
}

// run reconciles every interval until ctx ends.
func (r *reconciler) run(ctx context.Context) {
	if r.o.CRISocket == "" || r.o.ReconcileInterval <= 0 {
		return
	}
	t := time.NewTicker(r.o.ReconcileInterval)
	defer t.Stop()
	defer r.closeRuntime()
	for {
		if err := r.once(ctx); err != nil {
			r.log.Warn("reconcile of attachments skipped", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// closeRuntime drops the CRI connection, if any.
func (r *reconciler) closeRuntime() {
	if r.runtime != nil {
		r.runtime.close()
	}
}

func (r *reconciler) once(ctx context.Context) error {
	conf, err := ownPluginConf(r.o.ConfPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil // not written yet: no attachment can exist
	}
	if err != nil {
		return err
	}
	if r.runtime == nil {
		r.runtime = &runtimeClient{socket: r.o.CRISocket}
	}
	answer, err := r.runtime.sandboxes(ctx)
	if err != nil {
		return err
	}
	j, ok, err := r.believe(ctx, answer)
	if err != nil || !ok {
		return err
	}
	collected, err := r.d.Reconcile(ctx, conf, r.o.BinDir, j.live, reconcileGrace)
	if len(collected) > 0 {
		r.log.Info("tore down the attachments of sandboxes the runtime no longer has", "containers", collected)
	}
	republished, rerr := r.d.Republish(ctx, conf, r.o.BinDir, j.unreported)
	if len(republished) > 0 {
		r.log.Info("writing again the network-status of running pods that have none", "containers", republished)
	}
	return errors.Join(err, rerr)
}

// judgement is what a believed runtime answer and the API server's pods
// say: the containers to keep, and those of running pods without
// network-status, to write it again.
type judgement struct {
	live       map[string]bool
	unreported []string
}

// believe checks the runtime's answer against the API server's pods of
// this node and returns the containers to keep whatever their age: the
// runtime's sandboxes, and the recorded containers of pods the API server
// has running here but the runtime does not list. ok is false when the
// answer is not believed at all: a runtime that lists none of the node's
// running pods is not the one that runs them (a second containerd beside
// CRI-O, say), and its answer would tear every pod's networks down.
func (r *reconciler) believe(ctx context.Context, a runtimeAnswer) (judgement, bool, error) {
	recs, err := r.records()
	if err != nil {
		return judgement{}, false, err
	}
	if r.client == nil {
		return judgement{live: a.sandboxes}, r.believeAlone(a, len(recs)), nil
	}
	pods, err := sandboxedPods(ctx, r.client, r.o.NodeName)
	if err != nil {
		return judgement{}, false, err
	}
	if len(pods.running) > 0 && !listsAny(a, pods.running) {
		r.distrust(fmt.Sprintf("the runtime at %s lists %d sandboxes, none of the %d running pods of this node; runtime GC skipped",
			a.socket, len(a.sandboxes), len(pods.running)))
		return judgement{}, false, nil
	}
	r.trust()
	var cached []attachments.Cached
	if !listsAll(a, pods.running) {
		cached = r.cached()
	}
	return judgement{live: keepRunning(a, pods.running, recs, cached), unreported: unreported(a, pods.unreported, recs)}, true, nil
}

// cached is what the runtime's libcni cache holds, to name the sandboxes
// of running pods that have no record. An entry that cannot be read names
// no pod: it is passed over.
func (r *reconciler) cached() []attachments.Cached {
	all := func(string) bool { return true }
	entries, err := attachments.ReadRuntimeCache(cmp.Or(r.o.RuntimeCacheDir, cnicache.DefaultDir), all)
	if err != nil {
		r.log.Debug("runtime GC: libcni cache entries passed over", "err", err)
	}
	return entries
}

// believeAlone judges an answer with nothing to check it against: one
// that lists no sandbox at all while containers have records, or while
// the runtime's libcni cache holds attachments (pods the runtime attached
// itself have no record, and the default network's GC would free their
// leases), is not believed.
func (r *reconciler) believeAlone(a runtimeAnswer, records int) bool {
	if len(a.sandboxes) > 0 {
		r.trust()
		return true
	}
	if cached := len(r.cached()); records > 0 || cached > 0 {
		r.distrust(fmt.Sprintf("the runtime at %s lists no sandbox while %d containers have attachment records and its libcni cache holds %d attachments, "+
			"and without an API server client that cannot be checked; runtime GC skipped", a.socket, records, cached))
		return false
	}
	r.trust()
	return true
}

// records reads every readable attachment record: those that cannot be
// read are never torn down by the runtime GC either.
func (r *reconciler) records() ([]*attachmentapi.Record, error) {
	store := attachments.NewStore(r.o.CacheDir)
	ids, err := store.List()
	if err != nil {
		return nil, err
	}
	var recs []*attachmentapi.Record
	for _, id := range ids {
		if rec, err := store.Load(id); err == nil {
			recs = append(recs, rec)
		}
	}
	return recs, nil
}

func (r *reconciler) distrust(why string) {
	if !r.distrusted {
		r.log.Warn("runtime GC: the container runtime's answer is not believed", "reason", why)
		r.events.RuntimeGCSkipped(why)
	}
	r.distrusted = true
}

func (r *reconciler) trust() {
	if r.distrusted {
		r.log.Info("runtime GC: the container runtime's answer is believed again", "socket", r.o.CRISocket)
	}
	r.distrusted = false
}

// listsAny tells whether the runtime lists any of the pods.
func listsAny(a runtimeAnswer, pods map[podKey]bool) bool {
	for k := range pods {
		if a.pods[k] {
			return true
		}
	}
	return false
}

// listsAll tells whether the runtime lists every one of the pods.
func listsAll(a runtimeAnswer, pods map[podKey]bool) bool {
	for k := range pods {
		if !a.pods[k] {
			return false
		}
	}
	return true
}

// keepRunning is the runtime's sandboxes plus the containers of running
// pods the runtime does not list: those of hwnet's records, and those the
// runtime's libcni cache names, which the default network may hold
// without a record.
func keepRunning(a runtimeAnswer, running map[podKey]bool, recs []*attachmentapi.Record, cached []attachments.Cached) map[string]bool {
	live := maps.Clone(a.sandboxes)
	for _, rec := range recs {
		if k := (podKey{rec.PodNamespace, rec.PodName}); running[k] && !a.pods[k] {
			live[rec.ContainerID] = true
		}
	}
	for _, c := range cached {
		if k := (podKey{c.PodNamespace, c.PodName}); running[k] && !a.pods[k] {
			live[c.ContainerID] = true
		}
	}
	return live
}

// unreported are the containers whose pod runs without network-status:
// the runtime's sandboxes with the record of such a pod, when the pod has
// no other (an older sandbox's may be left until GC).
func unreported(a runtimeAnswer, uids map[string]bool, recs []*attachmentapi.Record) []string {
	byPod := map[string][]string{}
	for _, rec := range recs {
		if uids[rec.PodUID] && a.sandboxes[rec.ContainerID] {
			byPod[rec.PodUID] = append(byPod[rec.PodUID], rec.ContainerID)
		}
	}
	var out []string
	for _, ids := range byPod {
		if len(ids) == 1 {
			out = append(out, ids[0])
		}
	}
	slices.Sort(out)
	return out
}
