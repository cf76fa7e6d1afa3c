package ctl

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	capturefmt "github.com/hwnet-io/hwnet/api/capture"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/node/capture"
)

func runCapture(_ context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 {
		return usageError{"want a subcommand: take or unpack"}
	}
	if isHelp(args[0]) {
		subcommandUsage(out, "capture", "take", "unpack")
		return nil
	}
	switch args[0] {
	case "take":
		return takeCapture(args[1:], out, errOut)
	case "unpack":
		return unpackCapture(args[1:], out, errOut)
	}
	return usageError{fmt.Sprintf("unknown subcommand %q (want take or unpack)", args[0])}
}

// takeCapture writes the node's NIC layout, scrubbed, to a file.
func takeCapture(args []string, out, errOut io.Writer) error {
	fs := newFlagSet("capture take", errOut)
	file := fs.String("o", "", "file to write the capture to (required), e.g. mynic.json")
	sysfs := fs.String("sysfs", "/sys", "sysfs root to capture")
	dev := fs.String("dev", "/dev", "device directory root")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: hwnetctl capture take -o FILE [flags]\n\nWrites the parts of sysfs and /dev that hwnet reads of this node's NICs, with MAC addresses,\nGUIDs, switch IDs and serial numbers replaced, to FILE: `hwnetctl capture unpack` makes it a tree\nthat hwnetctl inventory and config check read, and node/discovery/testdata/captures a test.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case *file == "":
		return usageError{"-o FILE is required"}
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	c, err := capture.Take(capture.Options{SysfsRoot: *sysfs, DevRoot: *dev, Kernel: unix.ByteSliceToString(uts.Release[:])})
	if err != nil {
		return err
	}
	data, err := capturefmt.Encode(c)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(*file, data, 0o644); err != nil {
		return fmt.Errorf("-o %s: %w", *file, err)
	}
	_, err = fmt.Fprintf(out, "%s: %d entries of %s and %s, identifiers replaced\n", *file, len(c.Entries), *sysfs, *dev)
	return err
}

// unpackCapture makes a capture a tree to read with --sysfs and --dev.
func unpackCapture(args []string, out, errOut io.Writer) error {
	fs := newFlagSet("capture unpack", errOut)
	dir := fs.String("dir", "", "empty or new directory to unpack into (required): DIR/sys and DIR/dev")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 1:
		return usageError{"want one capture file"}
	case *dir == "":
		return usageError{"--dir DIR is required"}
	}
	c, err := capturefmt.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	if err := capture.Unpack(c, *dir); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s (kernel %s, taken %s) unpacked: hwnetctl inventory --sysfs %s/sys --dev %s/dev\n",
		fs.Arg(0), c.Kernel, c.Taken.Format("2006-01-02"), *dir, *dir)
	return err
}
