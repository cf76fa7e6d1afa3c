package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Main runs hwnet-agent with its command-line arguments and returns the
// process exit code.
func Main(ctx context.Context, args []string, errOut io.Writer) int {
	opts, err := parseFlags(args, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(errOut, "hwnet-agent: %v\n", err)
		return 2
	}
	a, err := New(opts)
	if err == nil {
		err = a.Run(ctx)
	}
	if err != nil {
		opts.Logger.Error("hwnet-agent failed", "err", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, errOut io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("hwnet-agent", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&o.ConfigFile, "config-file", DefaultConfigFile, "pool configuration (the SR-IOV network device plugin's format, JSON or YAML)")
	fs.StringVar(&o.SysfsRoot, "sysfs", "/sys", "sysfs root")
	fs.StringVar(&o.DevRoot, "dev", "/dev", "device node root")
	fs.StringVar(&o.Netns, "netns", "", "path of the network namespace of the node's netdevs (default: the agent's own)")
	fs.StringVar(&o.HWDBFile, "hwdb", "", "extra NIC models, JSON or YAML")
	fs.StringVar(&o.PluginDir, "device-plugin-dir", DefaultPluginDir, "kubelet's device plugin directory (kubelet.sock and the pools' sockets)")
	fs.StringVar(&o.PodResourcesSocket, "pod-resources-socket", DefaultPodResourcesSocket, "kubelet's PodResources API socket")
	fs.StringVar(&o.DevinfoDir, "devinfo-dir", DefaultDevinfoDir, "directory of the device-info files written on Allocate")
	fs.DurationVar(&o.PollInterval, "poll-interval", DefaultPollInterval, "how often the PCI layout is checked for changes the kernel does not announce")
	fs.DurationVar(&o.GCInterval, "devinfo-gc-interval", DefaultGCInterval, "how often device-info files are checked against PodResources")
	format := fs.String("log-format", "json", "log format: json or text")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	logger, err := newLogger(errOut, *format, *level)
	o.Logger = logger
	if err != nil {
		return o, err
	}
	return o, checkIntervals(o)
}

// checkIntervals rejects intervals a ticker cannot run with.
func checkIntervals(o Options) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--poll-interval", o.PollInterval}, {"--devinfo-gc-interval", o.GCInterval}} {
		if d.v <= 0 {
			return fmt.Errorf("%s %v: want a positive duration", d.flag, d.v)
		}
	}
	return nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return slog.Default(), fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.Default(), fmt.Errorf("--log-format %q: want json or text", format)
}
