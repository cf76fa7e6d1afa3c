package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"time"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/podresources"
)

// Records are the CNI attachment records, as package cni/attachments keeps
// them.
type Records interface {
	// Changed is when the set of records last changed; while it stays,
	// they are not listed again.
	Changed() (time.Time, error)
	List() ([]string, error)
	Load(containerID string) (*attachmentapi.Record, error)
	Modified(containerID string) (time.Time, error)
	// RecordsDir is the directory whose entries are the records, watched
	// for another process's change; "" for none.
	RecordsDir() string
}

// DefaultPodResourcesSocket is kubelet's PodResources API, where the
// pods' holds are read from.
const DefaultPodResourcesSocket = podresources.DefaultSocket

// Sources are where a ledger is read from; an empty one is not read.
type Sources struct {
	// PodResourcesSocket is kubelet's PodResources API.
	PodResourcesSocket string
	// DevinfoDir holds the device plugins' device-info files, whose times
	// say since when a pod holds a device.
	DevinfoDir string
	// Checkpoint is the running DRA driver's checkpoint file, read
	// whatever it holds.
	Checkpoint string
	// Driver, when set, is the running DRA driver, nil until it runs:
	// Checkpoint is read as the driver keeps it between kubelet's calls
	// (or reads it), sparing a decode of the file it just wrote.
	Driver func() CheckpointViewer
	// PluginsDir is kubelet's DRA plugins directory: every hwnet
	// checkpoint in a driver's directory under it (checkpoint.Owned) is
	// read too, whatever the driver's name and with DRA on or off, so
	// that claims a renamed or disabled driver prepared still hold their
	// devices.
	PluginsDir string
	// PodUID, when set, names the UID of the pod kubelet reports by
	// namespace and name (PodResources says no UID), "" when unknown: a
	// pod recreated under the same name is then another pod.
	PodUID func(namespace, name string) string
	// PodRunning, when set, reports whether the node's pods cache holds a
	// pod of that name, and UID when not "", that has not ended: kubelet
	// omitting such a pod (it is starting) does not release its devices.
	PodRunning func(namespace, name, uid string) bool
	// PodEndsTold, when set, reports whether the node's pods cache runs
	// and tells the Book of each pod's end (Book.PodEnded): kubelet's
	// answer may then stand longer on an idle node (podsStaleFollowed).
	PodEndsTold func() bool
	// KubeletSettle, when set, is how long after kubelet's PodResources
	// socket appeared (its time) kubelet is taken to answer with every pod
	// it runs, by a Reader that has not heard from it before: a kubelet
	// that starts answers before its pods are loaded, and such a Reader
	// (an agent that started too) has no earlier answer to carry the holds
	// it leaves out from. Until then kubelet is unknown.
	KubeletSettle time.Duration
	// Records are the CNI attachment records.
	Records Records
	// Resets, when set, are the devices a pending VF settings reset
	// withholds (ResetFiles; the agent's performs them first). They are
	// read after the records: a teardown leaves its reset pending before
	// it removes its record, so a read sees one or the other.
	Resets func(context.Context) ([]Withheld, error)
	// Metrics counts the PodResources requests.
	Metrics *metrics.Metrics
}

// CheckpointViewer is a DRA driver that shows its checkpoint: it calls
// read with it, and read keeps nothing of what it is given.
type CheckpointViewer interface {
	ViewCheckpoint(read func(*checkpoint.Checkpoint)) error
}

// podResourcesTimeout bounds one read's talk with kubelet.
const podResourcesTimeout = 5 * time.Second

// Reader reads ledgers from the sources, re-reading a checkpoint or a
// record only when its file changed. One goroutine uses it at a time.
type Reader struct {
	src    Sources
	client *podresources.Client
	// last are each source's holders as last read, kept when a read
	// fails: a hold is not forgotten because its source hiccuped.
	last        map[string]map[string][]Holder
	checkpoints map[string]cachedCheckpoint
	records     map[string]cachedRecord
	// recordsChanged is the records directory's time last read.
	recordsChanged time.Time
	// podSeen is each hold kubelet last reported (sinceOf, sameAnswer);
	// answers counts its answers to this reader.
	podSeen map[podHold]podSeen
	answers uint64
	// ownAnswer says the last answer of kubelet is this reader's, made
	// from podSeen, with no hold of an earlier answer carried into it:
	// an answer that names the same holds is then the same answer.
	ownAnswer bool
	// kubelet is what the readers of one Book know of kubelet together:
	// its incarnation and how many times they asked it.
	kubelet *kubeletSeen
	// heard says kubelet answered this Reader once (settled).
	heard bool
	// podsAt is when kubelet was last asked, podsErr what it answered,
	// answeredAt when it last answered and answeredStarting whether it
	// was starting then; seen and seenChanged are the cheap sources'
	// times (Poll).
	podsAt  time.Time
	podsErr error
	// podsAsk is the number of this reader's last ask of kubelet
	// (kubeletSeen.asks).
	podsAsk          uint64
	answeredAt       time.Time
	answeredStarting bool
	seen             stamps
	seenChanged      time.Time
	// now is the clock Poll's intervals are measured on; polled is
	// Poll's last ledger.
	now    func() time.Time
	polled *Ledger
	// lastResets are the pending resets' fences as last read.
	lastResets []Fence
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// cachedCheckpoint is one checkpoint file as last read: its holders, nil
// for a file that is not hwnet's.
type cachedCheckpoint struct {
	stamp   fileStamp
	holders map[string][]Holder
}

// podHold is one device kubelet reports a pod's container holds.
type podHold struct {
	namespace, name, container, resource, device string
}

// podSeen is what an answer of kubelet said of a hold: since when, by
// its device-info file (zero for none), the pod's UID as the pods' cache
// gave it ("" for none), and the number of the answer that last named it.
type podSeen struct {
	since  time.Time
	uid    string
	answer uint64
}

type cachedRecord struct {
	mod     time.Time
	holders map[string]Holder
}

// NewReader reads from src.
func NewReader(src Sources) *Reader {
	return &Reader{src: src, last: map[string]map[string][]Holder{}, checkpoints: map[string]cachedCheckpoint{},
		records: map[string]cachedRecord{}, now: time.Now, kubelet: &kubeletSeen{}}
}

// Close ends the talk with kubelet.
func (r *Reader) Close() {
	if r.client != nil {
		r.client.Close()
		r.client = nil
	}
}

// Read is the ledger now, every source read. A source it cannot read is
// named in Unknown and its holders are the ones last read.
func (r *Reader) Read(ctx context.Context) *Ledger { return r.read(ctx, true) }

// Source names, in Unknown and as keys of Reader.last.
const (
	podsSource    = "kubelet PodResources"
	claimsSource  = "DRA checkpoint"
	recordsSource = "CNI attachment records"
)

// read reads the sources, kubelet only with askKubelet (else its last
// answer stands). ReadAt is the oldest answer's time.
func (r *Reader) read(ctx context.Context, askKubelet bool) *Ledger {
	var kubelet sourcePart
	var rest sourcePart
	taken := r.now()
	readAt := taken
	if r.src.PodResourcesSocket != "" {
		if askKubelet {
			r.podsAt, r.podsAsk = readAt, r.kubelet.asks.Add(1)
			if got, err := r.pods(ctx); err != nil {
				r.podsErr = err
			} else {
				r.podsErr, r.last[podsSource], r.answeredAt, r.answeredStarting = nil, got, readAt, r.starting()
			}
		}
		kubelet.add(podsSource, r.last[podsSource], r.podsErr)
		readAt = r.podsAt
	}
	if r.src.Checkpoint != "" || r.src.PluginsDir != "" {
		got, err := r.claims(ctx)
		rest.add(claimsSource, r.remember(claimsSource, got, err), err)
	}
	if r.src.Records != nil {
		got, err := r.containers(ctx)
		rest.add(recordsSource, r.remember(recordsSource, got, err), err)
	}
	if r.src.Resets != nil {
		var err error
		if rest.resets, err = r.resets(ctx); err != nil {
			rest.unknown = append(rest.unknown, fmt.Sprintf("%s: %v", resetsSource, err))
		}
	}
	l := compose(kubelet, rest)
	l.ReadAt, l.taken, l.done = readAt, taken, r.now()
	l.kube = kubeletRead{ask: r.podsAsk, askedAt: r.podsAt, err: r.podsErr, answer: r.last[podsSource],
		at: r.answeredAt, starting: r.answeredStarting}
	return l
}

// follow takes o's read of kubelet when o asked kubelet after this reader
// last did: the Book's two readers each reuse kubelet's last answer
// between the reads that ask it, and carry from it the pods a starting
// kubelet leaves out, so each must start from the newest, whichever of
// them asked.
func (r *Reader) follow(o *Ledger) {
	if o == nil || o.kube.ask <= r.podsAsk {
		return
	}
	k := o.kube
	r.podsAsk, r.podsAt, r.podsErr = k.ask, k.askedAt, k.err
	r.answeredAt, r.answeredStarting = k.at, k.starting
	r.last[podsSource] = k.answer
	r.ownAnswer = false
	r.heard = r.heard || !k.at.IsZero()
	r.polled = nil
}

// remember keeps a source's answer as its last, and gives the last one
// for a source that did not answer.
func (r *Reader) remember(name string, got map[string][]Holder, err error) map[string][]Holder {
	switch {
	case err == nil:
		r.last[name] = got
	case got == nil:
		got = r.last[name]
	}
	return got
}

// pods are the device plugin allocations kubelet reports.
func (r *Reader) pods(ctx context.Context) (map[string][]Holder, error) {
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	// Without its socket kubelet is not up: no use waiting for it.
	fi, err := os.Stat(r.src.PodResourcesSocket)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.noteIncarnation(fi)
	if err := r.settled(fi); err != nil {
		return nil, err
	}
	if r.client == nil {
		c, err := podresources.Dial(ctx, r.src.PodResourcesSocket)
		if err != nil {
			return nil, err
		}
		r.client = c
	}
	list, err := r.client.List(ctx)
	r.src.Metrics.PodResourcesRequest(err)
	if err != nil {
		// A kubelet that restarts serves a new socket: the next read
		// dials it, rather than wait out gRPC's reconnection backoff.
		r.Close()
		return nil, err
	}
	r.heard = true
	r.answers++
	if r.sameAnswer(list) {
		return r.last[podsSource], nil
	}
	seen := make(map[podHold]podSeen, len(r.podSeen))
	out := map[string][]Holder{}
	for ph, uid := range r.holdsOf(list) {
		h := Holder{Kind: Pod, Resource: ph.resource, Namespace: ph.namespace, Name: ph.name, Container: ph.container,
			Since: r.sinceOf(ph), PodUIDs: uidList(uid)}
		seen[ph] = podSeen{since: h.Since, uid: uid, answer: r.answers}
		out[ph.device] = append(out[ph.device], h)
	}
	r.podSeen = seen
	got, carried := r.carry(out)
	r.ownAnswer = !carried
	return got, nil
}

// sameAnswer reports whether kubelet's answer names exactly the holds
// its last answer to this reader did, each with the pod UID and the time
// it had, and that answer's holders stand as they were (ownAnswer): an
// idle node's poll then builds nothing. kubelet lists pods in no set
// order, so the holds are matched one by one.
func (r *Reader) sameAnswer(list []podresources.Pod) bool {
	if !r.ownAnswer || r.last[podsSource] == nil {
		return false
	}
	n := 0
	for ph, uid := range r.holdsOf(list) {
		s, ok := r.podSeen[ph]
		// A hold named twice, a pod of another UID, or a device-info
		// file that appeared is an answer to build anew.
		if !ok || s.answer == r.answers || s.uid != uid || s.since.IsZero() && !r.sinceOf(ph).IsZero() {
			return false
		}
		s.answer = r.answers
		r.podSeen[ph] = s
		n++
	}
	return n == len(r.podSeen)
}

// holdsOf yields each hold kubelet's answer names, with its pod's UID as
// the pods' cache gives it.
func (r *Reader) holdsOf(list []podresources.Pod) iter.Seq2[podHold, string] {
	return func(yield func(podHold, string) bool) {
		for _, p := range list {
			uid := r.podUID(p.Namespace, p.Name)
			for _, c := range p.Containers {
				for res, ids := range c.Devices {
					for _, id := range ids {
						if !yield(podHold{namespace: p.Namespace, name: p.Name, container: c.Name, resource: res, device: id}, uid) {
							return
						}
					}
				}
			}
		}
	}
}

// sinceOf is when kubelet handed the device out to the pod: the time of
// its device-info file, which Allocate writes. A hold kubelet reported
// before keeps the time it had, so an answer costs a stat per new hold,
// not one per device-info file: a node allocating its hundredth VF read
// a hundred files' times at each Allocate. Zero when there is no file.
func (r *Reader) sinceOf(h podHold) time.Time {
	if s, ok := r.podSeen[h]; ok && !s.since.IsZero() {
		return s.since
	}
	if r.src.DevinfoDir == "" {
		return time.Time{}
	}
	fi, err := os.Stat(filepath.Join(r.src.DevinfoDir, devinfo.FileName(h.resource, h.device)))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime().UTC().Truncate(time.Second)
}

// podUID is the pod's UID as the pods' cache knows it, "" when not.
func (r *Reader) podUID(namespace, name string) string {
	if r.src.PodUID == nil {
		return ""
	}
	return r.src.PodUID(namespace, name)
}

// uidList is a holder's PodUIDs of one UID, none for "".
func uidList(uid string) []string {
	if uid == "" {
		return nil
	}
	return []string{uid}
}

// checkpointFile is the name of a DRA driver's checkpoint in its plugin
// directory (package dra writes it).
const checkpointFile = "checkpoint.json"

// claims are the DRA claims every hwnet checkpoint holds, each file read
// again only when it changed. One that cannot be read makes the source
// unknown.
func (r *Reader) claims(context.Context) (map[string][]Holder, error) {
	paths, err := r.checkpointPaths()
	if err != nil {
		return nil, err
	}
	next := make(map[string]cachedCheckpoint, len(paths))
	var errs []error
	for _, path := range paths {
		c, err := r.checkpoint(path)
		if err != nil {
			errs = append(errs, err)
			c = r.checkpoints[path]
		}
		next[path] = c
	}
	r.checkpoints = next
	// The files read hold what they hold; one that cannot be read holds
	// what it held when last read, and makes the source unknown.
	return mergeHolders(next), errors.Join(errs...)
}

// mergeHolders is the holds of every checkpoint. Where one file alone
// holds any, its holders are the answer as they are (no answer is ever
// written): a node's hwnet checkpoint with 100 claims of 4 devices was
// copied at each read, after every kubelet call.
func mergeHolders(files map[string]cachedCheckpoint) map[string][]Holder {
	var holding []map[string][]Holder
	for _, c := range files {
		if len(c.holders) > 0 {
			holding = append(holding, c.holders)
		}
	}
	if len(holding) == 1 {
		return holding[0]
	}
	out := map[string][]Holder{}
	for _, hs := range holding {
		for id, h := range hs {
			out[id] = append(out[id], h...)
		}
	}
	return out
}

// checkpointPaths are the running driver's checkpoint and every other
// driver's under PluginsDir, sorted.
func (r *Reader) checkpointPaths() ([]string, error) {
	var paths []string
	if r.src.PluginsDir != "" {
		// kubelet makes its plugins directory as it starts: one that is
		// not there is not mounted, and its checkpoints are not known.
		if _, err := os.Stat(r.src.PluginsDir); err != nil {
			return nil, err
		}
		found, err := filepath.Glob(filepath.Join(r.src.PluginsDir, "*", checkpointFile))
		if err != nil {
			return nil, err
		}
		paths = found
	}
	if r.src.Checkpoint != "" && !slices.Contains(paths, filepath.Clean(r.src.Checkpoint)) {
		paths = append(paths, filepath.Clean(r.src.Checkpoint))
	}
	slices.Sort(paths)
	return paths, nil
}

// checkpoint reads one checkpoint file, unless it is as last read. A file
// gone holds nothing; one in another driver's directory that is not
// hwnet's holds nothing either.
func (r *Reader) checkpoint(path string) (cachedCheckpoint, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cachedCheckpoint{}, nil
	}
	if err != nil {
		return cachedCheckpoint{}, err
	}
	stamp := fileStamp{fi.ModTime(), fi.Size()}
	if last, ok := r.checkpoints[path]; ok && last.stamp == stamp {
		return last, nil
	}
	if d := r.driver(path); d != nil {
		var out map[string][]Holder
		if err := d.ViewCheckpoint(func(cp *checkpoint.Checkpoint) { out = claimHolders(cp) }); err != nil {
			return cachedCheckpoint{}, err
		}
		// Stamped as the stat before it found the file: a newer content
		// is read again at the next poll.
		return cachedCheckpoint{stamp: stamp, holders: out}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cachedCheckpoint{}, err
	}
	if path != filepath.Clean(r.src.Checkpoint) && !checkpoint.Owned(data, filepath.Base(filepath.Dir(path))) {
		return cachedCheckpoint{stamp: stamp}, nil
	}
	cp, err := checkpoint.Decode(data)
	if err != nil {
		return cachedCheckpoint{}, fmt.Errorf("%s: %w", path, err)
	}
	return cachedCheckpoint{stamp: stamp, holders: claimHolders(cp)}, nil
}

// driver is the running DRA driver when path is its checkpoint, else
// nil.
func (r *Reader) driver(path string) CheckpointViewer {
	if r.src.Driver == nil || path != filepath.Clean(r.src.Checkpoint) {
		return nil
	}
	return r.src.Driver()
}

// claimHolders are the holds of cp's claims by device, sharing nothing
// with cp.
func claimHolders(cp *checkpoint.Checkpoint) map[string][]Holder {
	out := map[string][]Holder{}
	for uid, c := range cp.Claims {
		for _, d := range c.Devices {
			out[d.PCIAddress] = append(out[d.PCIAddress], Holder{Kind: Claim, Resource: d.Resource, UID: string(uid),
				Namespace: c.Namespace, Name: c.Name, PodUIDs: slices.Clone(c.Pods), Since: c.Prepared})
		}
	}
	return out
}
