package crinet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/hwnet-io/hwnet/api/crinet/networkfile"
	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
)

// Network is one managed network as stored: its configuration as the API
// gave it (uid and generation set) and the CNI configuration list pods get.
type Network struct {
	Key      Key
	Config   *crinetapi.NetworkConfig
	ConfList []byte
}

// ResourceName is the device plugin resource its attachments take.
func (n Network) ResourceName() string {
	return n.Config.GetMetadata().GetAnnotations()[cache.ResourceNameAnnotation]
}

// Store keeps managed networks in memory and, one file each (package
// api/crinet/networkfile), in a directory, so they survive agent restarts. Its methods are safe for
// concurrent use; a Network it returns is never changed afterwards.
type Store struct {
	dir       string
	validator Validator
	locks     *keyedLocks
	// roomMu serialises the Sets' checks of MaxTotalBytes with their puts.
	roomMu sync.Mutex

	mu   sync.RWMutex
	nets map[Key]Network
	// held counts the requests attaching pods to each network (Attaching).
	held map[Key]int
}

// OpenStore loads every network stored in dir, creating dir if needed.
// A file that cannot be read or no longer validates is left on disk and
// reported in the returned error, which does not stop the others loading.
func OpenStore(dir string, v Validator) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("CRI network store: %w", err)
	}
	s := &Store{dir: dir, validator: v, locks: newKeyedLocks(), nets: map[Key]Network{}, held: map[Key]int{}}
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("CRI network store: %w", err)
	}
	var errs []error
	for _, p := range paths {
		n, err := s.load(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// A file written before the limits, or copied in, may not fit.
		if err := s.checkRoom(n); err != nil {
			errs = append(errs, fmt.Errorf("CRI network file %s: %w", p, err))
			continue
		}
		s.nets[n.Key] = n
	}
	return s, errors.Join(errs...)
}

func (s *Store) load(path string) (Network, error) {
	stored, err := networkfile.Load(path)
	if err != nil {
		return Network{}, fmt.Errorf("CRI network store: %w", err)
	}
	return s.build(stored.Config, parseOnly)
}

// parseOnly re-reads a stored network without requiring its plugins: one
// uninstalled since is reported by ListPodNetwork's status, not dropped.
const parseOnly = true

func (s *Store) build(cfg *crinetapi.NetworkConfig, skipInstalled bool) (Network, error) {
	v := s.validator
	if skipInstalled {
		v = Validator{}
	}
	k, dl, err := v.validate(cfg, !skipInstalled)
	if err != nil {
		return Network{}, err
	}
	return newNetwork(k, cfg, dl)
}

func newNetwork(k Key, cfg *crinetapi.NetworkConfig, dl *netconf.Delegate) (Network, error) {
	data, err := dl.Bytes()
	if err != nil {
		return Network{}, err
	}
	return Network{Key: k, Config: cfg, ConfList: data}, nil
}

// Get returns the network, if stored.
func (s *Store) Get(k Key) (Network, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n, ok := s.nets[k]
	return n, ok
}

// getHeld is Get, holding the network for the request of ctx, if any, so
// that Remove refuses it until the request is done. It waits for a Set or
// Remove of the network under way: a Remove then either goes first, and
// the network is gone, or finds it held.
func (s *Store) getHeld(ctx context.Context, k Key) (Network, bool) {
	h := holdsOf(ctx)
	if h == nil {
		return s.Get(k)
	}
	unlock := s.locks.lock(k)
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nets[k]
	if ok {
		s.held[k]++
		h.add(s, k)
	}
	return n, ok
}

func (s *Store) unhold(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[k]--; s.held[k] <= 0 {
		delete(s.held, k)
	}
}

// List returns every network, sorted by namespace and name.
func (s *Store) List() []Network {
	s.mu.RLock()
	nets := make([]Network, 0, len(s.nets))
	for _, n := range s.nets {
		nets = append(nets, n)
	}
	s.mu.RUnlock()
	slices.SortFunc(nets, func(a, b Network) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	return nets
}

// put writes the network's file, then makes it visible.
func (s *Store) put(n Network) error {
	data, err := networkfile.Encode(n.Config)
	if err != nil {
		return fmt.Errorf("CRI network %s: %w", n.Key, err)
	}
	if err := writeDurably(s.path(n.Key), data); err != nil {
		return fmt.Errorf("CRI network %s: %w", n.Key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nets[n.Key] = n
	return nil
}

// checkUnheld refuses a network a request holds: that request's pod is
// being attached to it.
func (s *Store) checkUnheld(k Key) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if n := s.held[k]; n > 0 {
		return fmt.Errorf("%w: network %s: %d CNI ADD(s) are attaching pods to it; try again once they are done", ErrInUse, k, n)
	}
	return nil
}

// delete removes the network's file, then forgets it: once the file is
// gone, so is the network at the next start.
func (s *Store) delete(k Key) error {
	if err := os.Remove(s.path(k)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("CRI network %s: %w", k, err)
	}
	s.mu.Lock()
	delete(s.nets, k)
	s.mu.Unlock()
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("CRI network %s: %w", k, err)
	}
	return nil
}

// path is the network's file: namespace and name are DNS labels, which
// never hold '_', so the file name is unambiguous.
func (s *Store) path(k Key) string {
	return filepath.Join(s.dir, k.Namespace+"_"+k.Name+".json")
}

// writeDurably replaces path atomically and flushes it and its directory,
// so an acknowledged Set survives a crash of the node too.
func writeDurably(path string, data []byte) error {
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// sameSpec says whether two configurations differ only in uid and
// generation.
func sameSpec(a, b *crinetapi.NetworkConfig) bool {
	a, b = proto.CloneOf(a), proto.CloneOf(b)
	for _, c := range []*crinetapi.NetworkConfig{a, b} {
		if c.Metadata != nil {
			c.Metadata.Uid, c.Metadata.Generation = "", 0
			if c.Metadata.Namespace == "" {
				c.Metadata.Namespace = DefaultNamespace
			}
		}
	}
	return proto.Equal(a, b)
}
