package delegate

import (
	"sync"

	"github.com/hwnet-io/hwnet/cni/netconf"
)

// parsedConfigs keeps the configuration lists parsed from
// NetworkAttachmentDefinitions' spec.config, keyed by the text itself, so
// the pods of a deployment do not each parse the same text again on their
// way to start. A changed NAD has a new text and so a new entry. Lists
// read from disk are not kept: a file can change under the same name.
type parsedConfigs struct {
	limit int

	mu    sync.Mutex
	lists map[configKey]*netconf.Delegate
}

type configKey struct{ namespace, name, config string }

func newParsedConfigs(limit int) *parsedConfigs {
	return &parsedConfigs{limit: limit, lists: map[configKey]*netconf.Delegate{}}
}

// resolve is netconf.Resolve, from memory where it can be. The lists it
// returns are shared: netconf's Inject copies before it changes anything.
func (p *parsedConfigs) resolve(namespace, name, config, confDir string, skip func(string) bool) (*netconf.Delegate, error) {
	if config == "" {
		return netconf.Resolve(namespace, name, config, confDir, skip)
	}
	key := configKey{namespace, name, config}
	p.mu.Lock()
	dl, ok := p.lists[key]
	p.mu.Unlock()
	if ok {
		return dl, nil
	}
	dl, err := netconf.Resolve(namespace, name, config, confDir, skip)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Stale texts of edited NADs would otherwise pile up; starting over
	// costs one parse per network in use.
	if len(p.lists) >= p.limit {
		clear(p.lists)
	}
	p.lists[key] = dl
	return dl, nil
}
