// Command hwnet-agent is hwnet's node agent: one kubelet device plugin per
// resource pool of the node's SR-IOV and other NICs. It reads its flags
// into the agent's options (package agent) and runs the agent, or, with
// --uninstall, removes hwnet from the node (package deploy/uninstall).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hwnet-io/hwnet/agent"
	"github.com/hwnet-io/hwnet/deploy/uninstall"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/internal/gcpace"
	"github.com/hwnet-io/hwnet/internal/startup"
	"github.com/hwnet-io/hwnet/internal/version"
	"github.com/hwnet-io/hwnet/node/handout"
	"github.com/hwnet-io/hwnet/node/podresources"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs hwnet-agent with its command-line arguments and returns the
// process exit code. --version answers on out, everything else on errOut.
func run(ctx context.Context, args []string, out, errOut io.Writer) int {
	c, err := parseFlags(args, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errVersion) {
		fmt.Fprintln(out, "hwnet-agent", version.Get())
		return 0
	}
	if err != nil {
		fmt.Fprintf(errOut, "hwnet-agent: %v\n", err)
		return 2
	}
	if c.uninstall {
		err = uninstall.Run(ctx, uninstallOptions(c.opts))
	} else {
		var a *agent.Agent
		if c.paceGC {
			defer gcpace.Start().Stop()
		}
		if c.releaseStartupPages {
			c.opts.Serving = func() { startup.ReleasePages(c.opts.Logger) }
		}
		if a, err = agent.New(c.opts); err == nil {
			err = a.Run(ctx)
		}
	}
	if err != nil {
		c.opts.Logger.Error("hwnet-agent failed", "err", err)
		return 1
	}
	return 0
}

// uninstallOptions is the paths of hwnet's files on the node, as the
// agent's flags name them.
func uninstallOptions(o agent.Options) uninstall.Options {
	u := uninstall.Options{ConfigFile: o.ConfigFile, PluginDir: o.PluginDir, DevinfoDir: o.DevinfoDir, CDIDir: cmp.Or(o.CDIDir, handout.DefaultCDIDir),
		LastGoodConfig: o.LastGoodConfig, FenceDir: cmp.Or(o.FenceDir, agent.DefaultFenceDir), ProbeAddr: o.ProbeAddr, Logger: o.Logger,
		PodResourcesSocket: cmp.Or(o.PodResourcesSocket, podresources.DefaultSocket),
		DRAPluginsDir:      cmp.Or(o.DRAPluginsDir, agent.DefaultDRAPluginsDir)}
	if o.DRA != nil {
		u.DRACheckpoint = dra.CheckpointPath(o.DRA.DriverName, o.DRA.PluginDir)
	}
	if o.CNI != nil {
		cni := o.CNI.WithDefaults()
		u.CNI = &cni
	}
	return u
}
