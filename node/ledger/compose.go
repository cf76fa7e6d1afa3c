package ledger

import (
	"fmt"
	"slices"
	"time"
)

// sourcePart is what some of the sources say: each one's holders by
// device (never written: a reader keeps them as its last answers), why
// any of them is unknown, and the VF resets pending.
type sourcePart struct {
	answers []map[string][]Holder
	unknown []string
	resets  []Fence
}

// add takes a source's answer (got), or its error.
func (p *sourcePart) add(name string, got map[string][]Holder, err error) {
	if err != nil {
		p.unknown = append(p.unknown, fmt.Sprintf("%s: %v", name, err))
	}
	if got != nil {
		p.answers = append(p.answers, got)
	}
}

// kubeletRead is what a read knows of kubelet: the number (among the
// Book's readers' asks) and time of its last ask, answered or not, and
// that ask's error; kubelet's last answer, when it came (zero if it never
// did) and whether kubelet had restarted lately then, so that the answer
// may leave out pods it runs (Reader.starting).
type kubeletRead struct {
	ask      uint64
	askedAt  time.Time
	err      error
	answer   map[string][]Holder
	at       time.Time
	starting bool
}

// compose is the ledger of kubelet's answer and the other sources'.
func compose(kubelet, rest sourcePart) *Ledger {
	byDevice := map[string][]Holder{}
	for _, part := range []sourcePart{kubelet, rest} {
		for _, got := range part.answers {
			for id, hs := range got {
				byDevice[id] = append(byDevice[id], hs...)
			}
		}
	}
	l := New(byDevice, append(slices.Clip(kubelet.unknown), rest.unknown...))
	l.resets = rest.resets
	l.kubelet, l.rest = kubelet, rest
	return l
}

// withNewerKubelet is l with o's read of kubelet when o asked kubelet
// later (the readers of a Book number their asks together). Each reader
// follows the newest answer before it reads, but Watch's reads outside
// the Book's lock: one under way as the Book asks kubelet must not undo
// what the newer answer said (an allocation it reported would look free,
// a kubelet it found down would look up).
func (l *Ledger) withNewerKubelet(o *Ledger) *Ledger {
	if o == nil || l.kube.ask >= o.kube.ask {
		return l
	}
	n := compose(o.kubelet, l.rest)
	n.ReadAt, n.taken, n.done = l.ReadAt, l.taken, l.done
	n.kube = o.kube
	return n
}
