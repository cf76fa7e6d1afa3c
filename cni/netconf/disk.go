package netconf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// NotFoundError is NPWG 3.4.1 step 4: no configuration on disk has the name.
type NotFoundError struct {
	Dir, Name string
	// Skipped has one error per unreadable or invalid file, each naming it:
	// one of them may be the configuration the operator meant.
	Skipped []error
}

func (e *NotFoundError) Error() string {
	msg := fmt.Sprintf("no CNI configuration named %q in %s", e.Name, e.Dir)
	if len(e.Skipped) == 0 {
		return msg
	}
	skipped := make([]string, len(e.Skipped))
	for i, err := range e.Skipped {
		skipped[i] = err.Error()
	}
	return msg + " (skipped " + strings.Join(skipped, "; ") + ")"
}

// Resolve determines the configuration list for a NetworkAttachmentDefinition
// by NPWG 3.4.1: its spec.config if present (an invalid one is an error, not
// a reason to look on disk), else FindOnDisk in confDir.
func Resolve(nadNamespace, nadName, specConfig, confDir string, skip func(string) bool) (*Delegate, error) {
	nad := fmt.Sprintf("NetworkAttachmentDefinition %s/%s", nadNamespace, nadName)
	if specConfig != "" {
		return Parse([]byte(specConfig), nadName, nad+" spec.config")
	}
	d, err := FindOnDisk(confDir, nadName, skip)
	if err != nil {
		return nil, fmt.Errorf("%s has no spec.config and %w", nad, err)
	}
	return d, nil
}

// FindOnDisk is NPWG 3.4.1 steps 2 and 3: the first *.conflist in confDir
// (sorted by name) whose "name" is name, else the first such *.conf or
// *.json. Unreadable or invalid files are skipped and listed in the
// *NotFoundError; skip, when not nil, leaves out files such as hwnet's own.
func FindOnDisk(confDir, name string, skip func(path string) bool) (*Delegate, error) {
	notFound := &NotFoundError{Dir: confDir, Name: name}
	for _, extensions := range [][]string{{".conflist"}, {".conf", ".json"}} {
		paths, err := ConfigFiles(confDir, skip, extensions...)
		if err != nil {
			return nil, err
		}
		for _, path := range paths {
			d, err := LoadFile(path)
			switch {
			case err != nil:
				notFound.Skipped = append(notFound.Skipped, err)
			case d.Name == name:
				return d, nil
			}
		}
	}
	return nil, notFound
}

// ConfigFiles lists confDir's files with the given extensions in the order
// os.ReadDir gives, sorted by file name as libcni sorts them; skip, when not
// nil, leaves some out. A missing directory has no files.
func ConfigFiles(confDir string, skip func(string) bool, extensions ...string) ([]string, error) {
	entries, err := os.ReadDir(confDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the CNI configuration directory: %w", err)
	}
	var paths []string
	for _, entry := range entries {
		path := filepath.Join(confDir, entry.Name())
		if entry.IsDir() || !slices.Contains(extensions, filepath.Ext(path)) || (skip != nil && skip(path)) {
			continue
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// LoadFile reads one conf or conflist file, such as the cluster-wide default
// network's. The file must name its network.
func LoadFile(path string) (*Delegate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, "", path)
}
