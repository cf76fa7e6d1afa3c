package ledger

import (
	"os"
	"slices"
	"syscall"
	"time"
)

// kubeletSettle is how long after kubelet (re)starts the pods it no
// longer reports keep the devices they held, when the node's pods cannot
// be asked (Sources.PodRunning unset): a kubelet that starts serves
// PodResources before its pod sources are loaded, and answers without the
// pods it runs.
const kubeletSettle = 30 * time.Second

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
	if id != r.socket && r.socket != (socketID{}) {
		r.incarnationAt = r.now()
	}
	r.socket = id
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
// kubeletSettle after kubelet started.
func (r *Reader) carry(got map[string][]Holder) map[string][]Holder {
	for id, hs := range r.last[podsSource] {
		for _, h := range hs {
			if !slices.ContainsFunc(got[id], func(o Holder) bool { return sameHolder(o, h) }) && r.stillRuns(h) {
				got[id] = append(got[id], h)
			}
		}
	}
	return got
}

// stillRuns reports whether the pod of h, which kubelet no longer
// reports, may still run.
func (r *Reader) stillRuns(h Holder) bool {
	if r.src.PodRunning == nil {
		return r.now().Sub(r.incarnationAt) < kubeletSettle
	}
	uid := ""
	if len(h.PodUIDs) > 0 {
		uid = h.PodUIDs[0]
	}
	return r.src.PodRunning(h.Namespace, h.Name, uid)
}
