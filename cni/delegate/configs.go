package delegate

import (
	"os"
	"sync"

	"github.com/hwnet-io/hwnet/cni/netconf"
)

// parsedConfigs keeps configuration lists parsed from
// NetworkAttachmentDefinitions' spec.config and from the cluster-wide
// default network's file, keyed by the text itself, so the pods of a
// deployment do not each parse the same text again on their way to start.
// A changed text is a new entry. Lists a NAD finds on disk by name are not
// kept: which file holds the name can change.
type parsedConfigs struct {
	limit int

	mu    sync.Mutex
	lists map[configKey]*netconf.Delegate
}

// configKey names a list by where it came from and its text: a NAD's
// namespace and name, or "" and a file's path.
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
	return p.parse(configKey{namespace, name, config}, func() (*netconf.Delegate, error) {
		return netconf.Resolve(namespace, name, config, confDir, skip)
	})
}

// loadFile is netconf.LoadFile, parsing from memory a text read before.
func (p *parsedConfigs) loadFile(path string) (*netconf.Delegate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return p.parse(configKey{"", path, string(data)}, func() (*netconf.Delegate, error) {
		return netconf.Parse(data, "", path)
	})
}

func (p *parsedConfigs) parse(key configKey, parse func() (*netconf.Delegate, error)) (*netconf.Delegate, error) {
	p.mu.Lock()
	dl, ok := p.lists[key]
	p.mu.Unlock()
	if ok {
		return dl, nil
	}
	dl, err := parse()
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
