package ledger

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// kubeletSettle is how long after kubelet (re)starts, unless
// Sources.KubeletSettle says, the pods it no longer reports keep the
// devices they held when the node's pods cannot be asked
// (Sources.PodRunning unset), and allocations it has not reported yet
// are kept whatever it answers: a kubelet that starts serves PodResources
// before its pod sources are loaded, and answers without the pods it
// runs.
const kubeletSettle = 30 * time.Second

// kubeletSeen is what the readers of one Book know of kubelet together:
// one that sees its socket anew tells the other that kubelet restarted.
type kubeletSeen struct {
	// asks numbers the asks of kubelet, answered or not.
	asks atomic.Uint64
	mu   sync.Mutex
	// socket and incarnationAt are kubelet's PodResources socket as last
	// seen and when a new one was first (carry).
	socket        socketID
	incarnationAt time.Time
}

// noteIncarnation records when kubelet's PodResources socket was first
// seen as it is now, unless it is the first one seen: a new one is a
// kubelet that restarted, the first one a kubelet that was up already
// (it started the agent's pod).
func (r *Reader) noteIncarnation(fi os.FileInfo) {
	// The inode alone may be the removed socket's, reused.
	id := socketID{modTime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.ino, id.ctime = st.Ino, time.Unix(st.Ctim.Unix())
	}
	k := r.kubelet
	k.mu.Lock()
	defer k.mu.Unlock()
	if id != k.socket && k.socket != (socketID{}) {
		k.incarnationAt = r.now()
	}
	k.socket = id
}

// starting reports whether kubelet restarted less than its settle time
// ago, as this Book's readers saw it.
func (r *Reader) starting() bool {
	k := r.kubelet
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.incarnationAt.IsZero() && r.now().Sub(k.incarnationAt) < r.settle()
}

// settle is how long a kubelet that started may answer without its pods.
func (r *Reader) settle() time.Duration { return cmp.Or(r.src.KubeletSettle, kubeletSettle) }

// settled is an error while kubelet, which this Reader has not heard
// from, started less than KubeletSettle ago: its answer may leave out
// pods it runs, whose holds this Reader never read.
func (r *Reader) settled(fi os.FileInfo) error {
	if r.heard || r.src.KubeletSettle == 0 {
		return nil
	}
	// The text names when, not how long ago: it is the same at every
	// poll, so that the log and the readiness answer say it once.
	if started := fi.ModTime(); r.now().Sub(started) < r.src.KubeletSettle {
		return fmt.Errorf("kubelet started at %s (its PodResources socket's time); until it has run %s its answer may leave out pods it runs",
			started.UTC().Format(time.RFC3339), r.src.KubeletSettle)
	}
	return nil
}

// socketID tells one socket file from another made at the same path.
type socketID struct {
	ino            uint64
	ctime, modTime time.Time
}

// carry adds to got, kubelet's new answer, each hold of its last answer
// whose pod it omits although the pod still runs: a starting kubelet's
// answer is not a release. Whether the pod runs is the node's pods
// cache's to say, by name and UID; without it, a pod is taken to run for
// kubeletSettle after kubelet started. It says whether it carried any.
func (r *Reader) carry(got map[string][]Holder) (map[string][]Holder, bool) {
	carried := false
	for id, hs := range r.last[podsSource] {
		for _, h := range hs {
			if !slices.ContainsFunc(got[id], func(o Holder) bool { return sameHolder(o, h) }) && r.stillRuns(h) {
				got[id] = append(got[id], h)
				carried = true
			}
		}
	}
	return got, carried
}

// stillRuns reports whether the pod of h, which kubelet no longer
// reports, may still run.
func (r *Reader) stillRuns(h Holder) bool {
	if r.src.PodRunning == nil {
		return r.starting()
	}
	p := podOf(h)
	return r.src.PodRunning(p.namespace, p.name, p.uid)
}

// holderPod is the pod a kubelet holder names: its UID "" when the pods'
// cache gave none.
type holderPod struct{ namespace, name, uid string }

func podOf(h Holder) holderPod {
	p := holderPod{namespace: h.Namespace, name: h.Name}
	if len(h.PodUIDs) > 0 {
		p.uid = h.PodUIDs[0]
	}
	return p
}
