// Package wire is the protocol between the hwnet CNI shim and hwnet-agent:
// one HTTP POST of a JSON Request to Path over a unix socket, answered
// with a JSON Response. Version travels in a header so an agent and a shim
// from different releases fail with a clear message instead of misreading
// each other.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/hwnet-io/hwnet/cni/cninames"
)

const (
	// Path is the only endpoint the agent serves.
	Path = "/cni"
	// VersionHeader carries Version on every request.
	VersionHeader = "Hwnet-Wire-Version"
	// Version is the protocol version this package speaks.
	Version = "1"
	// MaxRequestBytes bounds a request body; CNI configs with a prevResult
	// are a few kilobytes, so this only stops runaway clients.
	MaxRequestBytes = 16 << 20
)

// CNI commands the agent handles. VERSION never leaves the shim.
const (
	CommandAdd    = "ADD"
	CommandDel    = "DEL"
	CommandCheck  = "CHECK"
	CommandStatus = "STATUS"
	CommandGC     = "GC"
)

// Request is one CNI invocation: the CNI_* environment and stdin.
type Request struct {
	Command     string          `json:"command"`
	ContainerID string          `json:"containerID,omitempty"`
	Netns       string          `json:"netns,omitempty"`
	IfName      string          `json:"ifName,omitempty"`
	Args        string          `json:"args,omitempty"`
	Path        string          `json:"path,omitempty"`
	Config      json.RawMessage `json:"config"`
}

// Response is the agent's answer: the result to print for a successful ADD
// (absent for the other commands), or the CNI error to print.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *types.Error    `json:"error,omitempty"`
}

// envVar is one CNI_* variable and the commands that require it, as the
// CNI spec's parameter table and libcni's skel define them.
type envVar struct {
	name     string
	field    func(*Request) *string
	required []string
	validate func(string) *types.Error
}

func envVars() []envVar {
	return []envVar{
		{"CNI_CONTAINERID", func(r *Request) *string { return &r.ContainerID },
			[]string{CommandAdd, CommandCheck, CommandDel}, cninames.ValidateContainerID},
		{"CNI_NETNS", func(r *Request) *string { return &r.Netns },
			[]string{CommandAdd, CommandCheck}, nil},
		{"CNI_IFNAME", func(r *Request) *string { return &r.IfName },
			[]string{CommandAdd, CommandCheck, CommandDel}, cninames.ValidateInterfaceName},
		{"CNI_ARGS", func(r *Request) *string { return &r.Args }, nil, nil},
		{"CNI_PATH", func(r *Request) *string { return &r.Path },
			[]string{CommandAdd, CommandCheck, CommandDel, CommandStatus, CommandGC}, nil},
	}
}

// RequestFromEnv builds the request for the command in CNI_COMMAND. Errors
// are CNI errors: code 4 naming every missing variable, or the code libcni
// uses for an invalid container ID or interface name. stdin must be JSON.
func RequestFromEnv(env func(string) string, stdin []byte) (*Request, error) {
	req := &Request{Command: env("CNI_COMMAND")}
	if !KnownCommand(req.Command) {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_COMMAND %q is not one of ADD, DEL, CHECK, STATUS, GC", req.Command), "")
	}
	var missing []string
	for _, v := range envVars() {
		value := env(v.name)
		*v.field(req) = value
		required := slices.Contains(v.required, req.Command)
		switch {
		case value == "" && required:
			missing = append(missing, v.name)
		case value != "" && required && v.validate != nil:
			if err := v.validate(value); err != nil {
				return nil, types.NewError(err.Code, v.name+": "+err.Msg, err.Details)
			}
		}
	}
	if len(missing) > 0 {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("required environment variables [%s] missing for %s", strings.Join(missing, ","), req.Command), "")
	}
	if !json.Valid(stdin) {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration on stdin is not valid JSON", "")
	}
	req.Config = json.RawMessage(stdin)
	return req, nil
}

// KnownCommand reports whether the agent handles command.
func KnownCommand(command string) bool {
	switch command {
	case CommandAdd, CommandDel, CommandCheck, CommandStatus, CommandGC:
		return true
	}
	return false
}

// DecodeRequest reads and checks one request body.
func DecodeRequest(r io.Reader) (*Request, error) {
	var req Request
	dec := json.NewDecoder(r)
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("decoding hwnet request: %w", err)
	}
	if !KnownCommand(req.Command) {
		return nil, fmt.Errorf("hwnet request: command %q is not one of ADD, DEL, CHECK, STATUS, GC", req.Command)
	}
	if len(req.Config) == 0 || string(req.Config) == "null" {
		return nil, fmt.Errorf("hwnet request: %s without a network configuration", req.Command)
	}
	return &req, nil
}

// AsCNIError is err as the CNI error to report: a *types.Error as is; an
// error wrapping one keeps its code and gains the wrapping message; any
// other error gets code 999.
func AsCNIError(err error) *types.Error {
	var cerr *types.Error
	switch {
	case errors.As(err, &cerr) && error(cerr) == err:
		return cerr
	case cerr != nil:
		return types.NewError(cerr.Code, err.Error(), "")
	default:
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
}
