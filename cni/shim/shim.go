// Package shim is the hwnet CNI plugin binary: a thin client that forwards
// each CNI request to hwnet-agent over its unix socket and prints the
// answer. It holds no Kubernetes client. When the agent is down it answers
// VERSION itself, waits a while for the agent on ADD and CHECK, and runs
// DEL from the on-disk attachment record so pods can always be torn down.
package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/hwnet-io/hwnet/api/agentrestart"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/wire"
	release "github.com/hwnet-io/hwnet/internal/version"
)

// Invocation is what the runtime gives a CNI plugin process.
type Invocation struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Main runs the plugin on the process's environment and standard streams
// and returns its exit code. Forwarding handles no signal: a runtime that
// gives up kills the shim, the kernel closes its connection, and that is
// how the agent learns; a handler would cost every ADD a thread. Only DEL
// without the agent, which runs the delegates itself, stops them on
// SIGINT or SIGTERM.
func Main() int {
	return Run(context.Background(), Invocation{Getenv: os.Getenv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
}

// Run executes one CNI command and returns the exit code: on success the
// result (if any) is on stdout and the code is 0; on failure a CNI error
// JSON is on stdout and the code is 1 (CNI spec, "Result").
func Run(ctx context.Context, inv Invocation) int {
	command := inv.Getenv("CNI_COMMAND")
	switch command {
	case "":
		fmt.Fprintf(inv.Stderr, "hwnet CNI plugin %s: forwards CNI requests to hwnet-agent\nCNI protocol versions supported: %s\n",
			release.Get(), strings.Join(version.All.SupportedVersions(), ", "))
		return 0
	case "VERSION":
		if err := version.All.Encode(inv.Stdout); err != nil {
			return printError(inv.Stdout, "", types.NewError(types.ErrIOFailure, err.Error(), ""))
		}
		return 0
	}
	logger := slog.New(slog.NewTextHandler(inv.Stderr, nil)).With("plugin", "hwnet", "command", command)
	cfg, result, err := execute(ctx, inv, logger)
	if err != nil {
		return printError(inv.Stdout, cfg.CNIVersion, err)
	}
	if _, err := inv.Stdout.Write(result); err != nil {
		return printError(inv.Stdout, cfg.CNIVersion, types.NewError(types.ErrIOFailure, err.Error(), ""))
	}
	return 0
}

// execute always returns a non-nil Conf so errors can carry its version.
func execute(ctx context.Context, inv Invocation, logger *slog.Logger) (*pluginconf.Conf, []byte, error) {
	stdin, err := io.ReadAll(inv.Stdin)
	if err != nil {
		return &pluginconf.Conf{}, nil, types.NewError(types.ErrIOFailure, fmt.Sprintf("reading stdin: %v", err), "")
	}
	req, err := wire.RequestFromEnv(inv.Getenv, stdin)
	if err != nil {
		return &pluginconf.Conf{}, nil, err
	}
	cfg, err := pluginconf.Parse(stdin)
	if err != nil {
		return &pluginconf.Conf{}, nil, err
	}
	if err := cfg.AllowsCommand(req.Command); err != nil {
		return cfg, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, CommandDeadline(req.Command))
	defer cancel()
	c := &call{cfg: cfg, req: req, client: wire.NewClient(cfg.SocketPath), logger: logger}
	result, err := c.run(ctx)
	return cfg, result, err
}

// CommandDeadline is the most one command may take, waiting for the agent
// included, so a wedged agent cannot hang the runtime: 4 minutes for ADD
// (kubelet allows RunPodSandbox twice its 2-minute runtime request
// timeout), 2 minutes for DEL and GC, 1 minute for CHECK and STATUS.
func CommandDeadline(command string) time.Duration {
	switch command {
	case wire.CommandAdd:
		return 4 * time.Minute
	case wire.CommandDel, wire.CommandGC:
		return 2 * time.Minute
	default:
		return time.Minute
	}
}

// call is one forwarded command.
type call struct {
	cfg    *pluginconf.Conf
	req    *wire.Request
	client *wire.Client
	logger *slog.Logger
}

func (c *call) run(ctx context.Context) ([]byte, error) {
	resp, err := c.forward(ctx)
	if !errors.Is(err, wire.ErrUnreachable) {
		return c.answer(resp, err)
	}
	switch c.req.Command {
	case wire.CommandAdd, wire.CommandCheck:
		return nil, types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("hwnet-agent is not reachable at %s after waiting %s", c.cfg.SocketPath, c.cfg.AgentWait), c.agentHint(err))
	case wire.CommandDel:
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		c.logger.Warn("hwnet-agent not reachable, running DEL from the attachment record",
			"socket", c.cfg.SocketPath, "containerID", c.req.ContainerID, "cacheDir", c.cfg.CacheDir, "err", err)
		return nil, deleteFromRecord(ctx, c.cfg, c.req, c.logger)
	case wire.CommandStatus:
		return nil, c.statusWithoutAgent(err)
	default:
		return nil, types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("GC needs hwnet-agent, which is not reachable at %s", c.cfg.SocketPath), c.agentHint(err))
	}
}

// statusWithoutAgent is STATUS's answer while the agent's socket does not
// answer (unreachable): ready while the agent's restart notice expects it
// back, since ADDs wait for it meanwhile; the plugin not available
// otherwise, which turns the node NotReady.
func (c *call) statusWithoutAgent(unreachable error) error {
	path := agentrestart.Path(c.cfg.SocketPath)
	n, err := agentrestart.Load(path)
	switch {
	case err != nil:
		c.logger.Warn("hwnet-agent's restart notice unreadable, so not counted", "path", path, "err", err)
	case n != nil && n.Expects(time.Now()):
		c.logger.Info("hwnet-agent restarting: STATUS ready while its ADDs wait for it",
			"socket", c.cfg.SocketPath, "stopped", n.Stopped, "until", n.Until)
		return nil
	case n != nil:
		return types.NewError(types.ErrPluginNotAvailable,
			fmt.Sprintf("hwnet-agent is not reachable at %s, and not back by %s as it said when it stopped at %s",
				c.cfg.SocketPath, n.Until.Format(time.RFC3339), n.Stopped.Format(time.RFC3339)), c.agentHint(unreachable))
	}
	return types.NewError(types.ErrPluginNotAvailable,
		fmt.Sprintf("hwnet-agent is not reachable at %s", c.cfg.SocketPath), c.agentHint(unreachable))
}

// forward sends the request. ADD and CHECK retry with backoff while the
// socket is missing or refuses, for up to AgentWait, because the agent may
// be restarting; the others need no agent (DEL) or must answer at once.
func (c *call) forward(ctx context.Context) (*wire.Response, error) {
	resp, err := c.client.Do(ctx, c.req)
	waits := c.req.Command == wire.CommandAdd || c.req.Command == wire.CommandCheck
	if !waits || !errors.Is(err, wire.ErrUnreachable) {
		return resp, err
	}
	c.logger.Info("hwnet-agent not reachable, waiting for it", "socket", c.cfg.SocketPath, "agentWait", c.cfg.AgentWait)
	waitCtx, cancel := context.WithTimeout(ctx, time.Duration(c.cfg.AgentWait))
	defer cancel()
	for delay := 25 * time.Millisecond; errors.Is(err, wire.ErrUnreachable); delay = min(2*delay, time.Second) {
		select {
		case <-waitCtx.Done():
			return nil, err
		case <-time.After(delay):
		}
		resp, err = c.client.Do(ctx, c.req)
	}
	return resp, err
}

func (c *call) agentHint(err error) string {
	return fmt.Sprintf("%v; check that the hwnet-agent DaemonSet pod on this node is running and ready "+
		"and that its CNI socket is %s", err, c.cfg.SocketPath)
}

// answer turns the agent's response into the bytes to print or the error.
func (c *call) answer(resp *wire.Response, err error) ([]byte, error) {
	switch {
	case err != nil:
		// The agent took the request but gave no answer: it died or the
		// deadline passed. The runtime retries; DEL is idempotent.
		return nil, types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("no answer from hwnet-agent at %s to %s", c.cfg.SocketPath, c.req.Command), err.Error())
	case resp.Error != nil:
		return nil, resp.Error
	case c.req.Command == wire.CommandAdd && len(resp.Result) == 0:
		return nil, types.NewError(types.ErrInternal, "hwnet-agent returned no result for ADD", "")
	}
	return resp.Result, nil
}

// printError writes err as the CNI error JSON (with the configuration's
// cniVersion, as the spec's error format has it) and returns exit code 1.
func printError(w io.Writer, cniVersion string, err error) int {
	out := struct {
		CNIVersion string `json:"cniVersion,omitempty"`
		*types.Error
	}{cniVersion, wire.AsCNIError(err)}
	data, _ := json.MarshalIndent(out, "", "    ")
	_, _ = w.Write(append(data, '\n'))
	return 1
}
