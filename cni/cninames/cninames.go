// Package cninames checks container IDs, network names and interface names
// by the CNI spec's rules, with the errors libcni's pkg/utils gives. It
// exists because that package compiles a regular expression when it is
// initialised, and with it regexp's and unicode's tables: about a tenth of
// the shim's CPU per exec, which the runtime pays twice per pod
// (docs/performance.md, "The shim's CPU"). Its tests hold it to libcni's
// answers.
package cninames

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/containernetworking/cni/pkg/types"
)

// maxInterfaceName is the kernel's IFNAMSIZ less its terminating NUL.
const maxInterfaceName = 15

// validName is libcni's `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// ValidateContainerID refuses an empty container ID or one with characters
// other than letters, digits, '_', '.' and '-' (not first).
func ValidateContainerID(containerID string) *types.Error {
	if containerID == "" {
		return types.NewError(types.ErrUnknownContainer, "missing containerID", "")
	}
	if !validName(containerID) {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "invalid characters in containerID", containerID)
	}
	return nil
}

// ValidateNetworkName refuses an empty network name or one with the
// characters a container ID may not have.
func ValidateNetworkName(networkName string) *types.Error {
	if networkName == "" {
		return types.NewError(types.ErrInvalidNetworkConfig, "missing network name:", "")
	}
	if !validName(networkName) {
		return types.NewError(types.ErrInvalidNetworkConfig, "invalid characters found in network name", networkName)
	}
	return nil
}

// ValidateInterfaceName refuses what the kernel's dev_valid_name refuses:
// an empty name, one longer than 15 bytes, "." and "..", and '/', ':' or
// white space anywhere.
func ValidateInterfaceName(ifName string) *types.Error {
	switch {
	case ifName == "":
		return types.NewError(types.ErrInvalidEnvironmentVariables, "interface name is empty", "")
	case len(ifName) > maxInterfaceName:
		return types.NewError(types.ErrInvalidEnvironmentVariables, "interface name is too long",
			fmt.Sprintf("interface name should be less than %d characters", maxInterfaceName+1))
	case ifName == "." || ifName == "..":
		return types.NewError(types.ErrInvalidEnvironmentVariables, "interface name is . or ..", "")
	case strings.ContainsFunc(ifName, func(r rune) bool { return r == '/' || r == ':' || unicode.IsSpace(r) }):
		return types.NewError(types.ErrInvalidEnvironmentVariables, "interface name contains / or : or whitespace characters", "")
	}
	return nil
}
