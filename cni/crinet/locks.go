package crinet

import "sync"

// keyedLocks serialises calls per network; a lock no call holds or waits
// for is forgotten, so the map holds only networks being worked on.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[Key]*keyedLock
}

type keyedLock struct {
	mu    sync.Mutex
	users int
}

func newKeyedLocks() *keyedLocks { return &keyedLocks{locks: map[Key]*keyedLock{}} }

// lock takes k's lock and returns the function that releases it.
func (l *keyedLocks) lock(k Key) func() {
	l.mu.Lock()
	kl, ok := l.locks[k]
	if !ok {
		kl = &keyedLock{}
		l.locks[k] = kl
	}
	kl.users++
	l.mu.Unlock()
	kl.mu.Lock()
	return func() {
		kl.mu.Unlock()
		l.mu.Lock()
		defer l.mu.Unlock()
		if kl.users--; kl.users == 0 {
			delete(l.locks, k)
		}
	}
}
