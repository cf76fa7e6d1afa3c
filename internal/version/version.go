// Package version says which hwnet release a binary is: the version the
// release build stamps with -ldflags, else the module version and VCS
// revision the Go toolchain records in every binary built from a checkout.
package version

import (
	"runtime"
	"runtime/debug"
)

// stamped is set at link time by `make build` and the Dockerfile
// (-X github.com/hwnet-io/hwnet/internal/version.stamped=$(git describe)), where
// the build may run without the .git directory the toolchain reads.
var stamped string

// Info is a binary's release and toolchain.
type Info struct {
	Version   string
	Revision  string
	GoVersion string
}

// Get returns this binary's version information.
func Get() Info {
	info := Info{Version: stamped, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return withUnknown(info)
	}
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			info.Revision = s.Value
		}
	}
	return withUnknown(info)
}

func withUnknown(i Info) Info {
	if i.Version == "" || i.Version == "(devel)" {
		i.Version = "unknown"
	}
	return i
}

// String is the line --version prints.
func (i Info) String() string {
	s := i.Version
	if i.Revision != "" {
		s += " (" + i.Revision + ")"
	}
	return s + " " + i.GoVersion
}
