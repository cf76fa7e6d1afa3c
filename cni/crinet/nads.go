package crinet

import (
	"context"
	"fmt"

	"github.com/hwnet-io/hwnet/cni/cache"
)

// NADs is the cache.NADSource the delegator resolves pods' network
// selections with: a managed network of the selection's namespace and
// name first, then Next (the NetworkAttachmentDefinition cache). A
// managed network thus shadows a NetworkAttachmentDefinition of the same
// namespace and name. Each lookup returns one stored version whole, so a
// pod gets the configuration before a Set or after it, never a mix.
type NADs struct {
	Store *Store
	// Store may be nil: then Next answers alone.
	// Next answers for names the store does not hold; nil answers none.
	Next cache.NADSource
}

// NAD implements cache.NADSource.
func (n NADs) NAD(ctx context.Context, namespace, name string) (cache.NAD, error) {
	if n.Store == nil {
		return n.next(ctx, namespace, name)
	}
	if net, ok := n.Store.getHeld(ctx, Key{Namespace: namespace, Name: name}); ok {
		return cache.NAD{Namespace: namespace, Name: name, ResourceName: net.ResourceName(), Config: string(net.ConfList)}, nil
	}
	return n.next(ctx, namespace, name)
}

func (n NADs) next(ctx context.Context, namespace, name string) (cache.NAD, error) {
	if n.Next == nil {
		return cache.NAD{}, fmt.Errorf("network %s/%s: no CRI network of that name: %w", namespace, name, cache.ErrNADNotFound)
	}
	return n.Next.NAD(ctx, namespace, name)
}
