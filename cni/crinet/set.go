package crinet

import (
	"crypto/rand"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
)

// Errors of Set and Remove besides ErrInvalid.
var (
	// ErrStale: the request's generation is not the network's current one.
	ErrStale = errors.New("stale generation")
	// ErrNotFound: no managed network has that namespace and name.
	ErrNotFound = errors.New("network not found")
	// ErrReadOnly: the request would change _fallback.
	ErrReadOnly = errors.New("read-only")
	// ErrInUse: running pods are attached to the network.
	ErrInUse = errors.New("network in use")
)

// Set validates cfg and stores it, serialised with every other call on
// the same network. A generation other than 0 must be the network's
// current one (0 for a network that does not exist yet), and a uid must be
// the network's. A change increases the generation; setting what is
// stored changes nothing. It returns the network as stored.
func (s *Store) Set(cfg *crinetapi.NetworkConfig) (Network, error) {
	if cfg.GetMetadata().GetName() == FallbackName {
		return Network{}, fmt.Errorf("%w: config.metadata.name %q is the runtime's on-disk default configuration", ErrReadOnly, FallbackName)
	}
	k, dl, err := s.validator.Validate(cfg)
	if err != nil {
		return Network{}, err
	}
	unlock := s.locks.lock(k)
	defer unlock()
	cur, exists := s.Get(k)
	if err := checkPreconditions(k, cfg.GetMetadata(), cur, exists); err != nil {
		return Network{}, err
	}
	if exists && sameSpec(cur.Config, cfg) {
		return cur, nil
	}
	stored := proto.CloneOf(cfg)
	md := stored.GetMetadata()
	md.Namespace = k.Namespace
	md.Generation = cur.Config.GetMetadata().GetGeneration() + 1
	md.Uid = cur.Config.GetMetadata().GetUid()
	if md.Uid == "" {
		md.Uid = rand.Text()
	}
	n, err := newNetwork(k, stored, dl)
	if err != nil {
		return Network{}, err
	}
	// Room is checked and taken in one step for all networks, or two Sets
	// of different networks could each fit alone and overflow together.
	s.roomMu.Lock()
	defer s.roomMu.Unlock()
	if err := s.checkRoom(n); err != nil {
		return Network{}, err
	}
	return n, s.put(n)
}

// checkPreconditions compares the request's uid and generation with the
// stored network's.
func checkPreconditions(k Key, md *crinetapi.NetworkMetadata, cur Network, exists bool) error {
	curMD := cur.Config.GetMetadata()
	if md.GetUid() != "" && md.GetUid() != curMD.GetUid() {
		if !exists {
			return fmt.Errorf("%w: network %s: config.metadata.uid %q: no such network exists (leave uid empty to create it)", ErrNotFound, k, md.GetUid())
		}
		return fmt.Errorf("%w: network %s: config.metadata.uid %q is not the network's uid %q (it was removed and created again)", ErrStale, k, md.GetUid(), curMD.GetUid())
	}
	if g := md.GetGeneration(); g != 0 && g != curMD.GetGeneration() {
		return fmt.Errorf("%w: network %s: config.metadata.generation %d is not the current generation %d (read it again with ListPodNetwork, or send 0 to overwrite)",
			ErrStale, k, g, curMD.GetGeneration())
	}
	return nil
}

// Remove deletes the managed network md names, serialised with every other
// call on it. A generation other than 0 must be the current one. inUse
// says which pods are attached to the network; while any is, the network
// is kept and Remove fails with ErrInUse naming them.
func (s *Store) Remove(md *crinetapi.NetworkMetadata, inUse func(Key) ([]string, error)) error {
	if md.GetName() == FallbackName {
		return fmt.Errorf("%w: metadata.name %q is the runtime's on-disk default configuration; remove its file instead", ErrReadOnly, FallbackName)
	}
	k, err := checkMetadata(md)
	if err != nil {
		return err
	}
	unlock := s.locks.lock(k)
	defer unlock()
	cur, exists := s.Get(k)
	if !exists {
		return fmt.Errorf("%w: %s", ErrNotFound, k)
	}
	if err := checkPreconditions(k, md, cur, exists); err != nil {
		return err
	}
	// An ADD looks the network up under the same lock (getHeld): none
	// starts attaching a pod to it while the records are read, and every
	// other reader goes on seeing it until it is decided to go.
	if err := s.checkUnheld(k); err != nil {
		return err
	}
	pods, err := inUse(k)
	if err != nil {
		return fmt.Errorf("network %s: cannot tell whether pods use it: %w", k, err)
	}
	if len(pods) > 0 {
		return fmt.Errorf("%w: network %s is attached to %d pod(s) on this node: %v; remove it once they are gone", ErrInUse, k, len(pods), pods)
	}
	return s.delete(k)
}
