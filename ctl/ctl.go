// Package ctl implements hwnetctl, the operator's command line: the node's
// NIC inventory and the virtual SR-IOV node for trying hwnet without
// hardware.
package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/hwnet-io/hwnet/internal/version"
)

// command is one hwnetctl subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, out, errOut io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"capture":      {"take this node's NIC layout, scrubbed, into a file; unpack one into a tree to read", runCapture},
		"config":       {"check a pool config against the node's NICs", runConfig},
		"doctor":       {"check, read-only, what keeps this node from serving its pools: IOMMU, firmware, drivers, kubelet", runDoctor},
		"devices":      {"list the node's devices: pool, mode, health and who holds each since when", runDevices},
		"explain":      {"explain pod NS/NAME: networks, resources, devices, attachments, status, Events", runExplain},
		"inventory":    {"list the node's PFs, VFs and NICs", runInventory},
		"network":      {"set, remove or list the networks of the CRI network API (hwnet-agent)", runNetwork},
		"podnetworks":  {"list the KEP-3698 PodNetworks, their conditions and the pods using them", runPodNetworks},
		"virtual-node": {"create, enter or destroy a virtual SR-IOV node", runVirtualNode},
	}
}

// Main runs hwnetctl with args (without the program name) and returns the
// process exit code: 0 on success, 2 for usage errors, 1 otherwise.
func Main(ctx context.Context, args []string, out, errOut io.Writer) int {
	cmds := commands()
	if len(args) == 0 {
		usage(errOut, cmds)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(out, cmds)
		return 0
	case "--version", "version":
		fmt.Fprintln(out, "hwnetctl", version.Get())
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(errOut, "hwnetctl: unknown command %q\n", args[0])
		usage(errOut, cmds)
		return 2
	}
	err := cmd.run(ctx, args[1:], out, errOut)
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		if err.Error() != "" {
			fmt.Fprintf(errOut, "hwnetctl %s: %v\n", args[0], err)
		}
		return 2
	default:
		fmt.Fprintf(errOut, "hwnetctl %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: hwnetctl <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'hwnetctl <command> -h' for a command's flags, 'hwnetctl --version' for the release.")
}

// usageError is a mistake in the command line rather than a failure.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, errOut io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("hwnetctl "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	return fs
}

// parseFlags parses args and turns a flag mistake, which the flag package
// has already printed with the usage, into a silent usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{}
	}
	return nil
}

func isHelp(arg string) bool { return arg == "-h" || arg == "--help" }

// subcommandUsage lists a command's subcommands, as usage lists commands.
func subcommandUsage(w io.Writer, cmd string, subs ...string) {
	fmt.Fprintf(w, "usage: hwnetctl %s <subcommand> [flags]\n\nsubcommands:\n", cmd)
	for _, s := range subs {
		fmt.Fprintf(w, "  %s\n", s)
	}
	fmt.Fprintf(w, "\nRun 'hwnetctl %s <subcommand> -h' for its flags.\n", cmd)
}
