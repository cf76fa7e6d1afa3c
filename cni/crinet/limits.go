package crinet

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
)

// Size limits of managed networks, in bytes of their protobuf encoding
// without uid and generation, which the store sets, so a network is as
// large stored as asked for (docs/cri-network-api.md, "Limits"). ListPodNetwork returns every
// network in one message, which a gRPC client by default takes up to
// 4 MiB: with the networks at most MaxTotalBytes together, their status
// and pods fit beside them, and List always answers.
const (
	// MaxNetworkBytes bounds one network's configuration: a real one is
	// a few hundred bytes.
	MaxNetworkBytes = 64 << 10
	// MaxTotalBytes bounds all managed networks together.
	MaxTotalBytes = 1 << 20
)

// ErrTooMuch marks a Set the store has no room for.
var ErrTooMuch = errors.New("over the size limit")

// checkNetworkSize refuses a configuration over MaxNetworkBytes.
func checkNetworkSize(cfg *crinetapi.NetworkConfig) error {
	if n := size(cfg); n > MaxNetworkBytes {
		return invalid("config", "%d bytes (protobuf encoding), over the limit of %d bytes (64 KiB) per network", n, MaxNetworkBytes)
	}
	return nil
}

// size is cfg's encoded size without uid and generation.
func size(cfg *crinetapi.NetworkConfig) int {
	md := cfg.GetMetadata()
	if md.GetUid() == "" && md.GetGeneration() == 0 {
		return proto.Size(cfg)
	}
	c := proto.CloneOf(cfg)
	c.Metadata.Uid, c.Metadata.Generation = "", 0
	return proto.Size(c)
}

// checkRoom refuses n unless, replacing the network of its key, all
// networks together stay within MaxTotalBytes.
func (s *Store) checkRoom(n Network) error {
	s.mu.RLock()
	total := size(n.Config)
	for k, other := range s.nets {
		if k != n.Key {
			total += size(other.Config)
		}
	}
	s.mu.RUnlock()
	if total > MaxTotalBytes {
		return fmt.Errorf("%w: config: network %s (%d bytes) would make the managed networks %d bytes in all, over the limit of %d bytes (1 MiB); remove networks first",
			ErrTooMuch, n.Key, size(n.Config), total, MaxTotalBytes)
	}
	return nil
}
