// Command hwnet-vnode-kernel does for a virtual node what the kernel does
// for real hardware but cannot do for the node's veth links and generated
// sysfs: it runs as a daemon beside the node (the e2e cluster starts one),
// gives a VF's netdev back to the node's network namespace when the
// namespace it was moved into is destroyed (virtualnode.Node.ReturnNetdevs),
// enacts writes to the tree's sriov_numvfs, unbind, bind and
// drivers_probe (virtualnode.Node.EnactWrites) and, with --devlink-record,
// the SF port adds and dels hwnet-agent --devlink=record:PATH keeps in
// that record (virtualnode.Node.EnactDevlinkRecord).
//
//	hwnet-vnode-kernel --node-dir DIR [--dev-dir DIR] [--devlink-record PATH]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/hwnet-io/hwnet/internal/version"
	"github.com/hwnet-io/hwnet/node/virtualnode"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, os.Args[1:], log); err != nil && !errors.Is(err, flag.ErrHelp) {
		log.Error("hwnet-vnode-kernel failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("hwnet-vnode-kernel", flag.ContinueOnError)
	dir := fs.String("node-dir", "", "the virtual node's state directory (required)")
	dev := fs.String("dev-dir", "", "a /dev for containers where the node's device files are mirrored as character devices after each enacted write, as devtmpfs shows a driver's devices (empty: none)")
	record := fs.String("devlink-record", "", "a devlink record (hwnet-agent --devlink=record:PATH, as this host sees the path) whose SF port adds and dels are enacted as mlx5 does (empty: none)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: hwnet-vnode-kernel --node-dir DIR [--dev-dir DIR] [--devlink-record PATH]\n\nGives VF netdevs back to the virtual node when the network namespace they were moved into is destroyed, and enacts writes to its sysfs tree's sriov_numvfs, unbind, bind and drivers_probe, and a devlink record's SF port adds and dels, as the kernel does for real hardware.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println("hwnet-vnode-kernel", version.Get())
		return nil
	}
	if *dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("--node-dir is required and no arguments are taken")
	}
	n, err := virtualnode.Open(*dir)
	if err != nil {
		return err
	}
	// Either ending ends both: a daemon doing half the kernel's job
	// would fail tests in ways far from the cause.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	writes, ports := make(chan error, 1), make(chan error, 1)
	go func() {
		defer cancel()
		writes <- n.EnactWritesInto(ctx, log, *dev, func() {
			log.Info("enacting writes to the node's sysfs", "node", n.Name(), "sys", n.SysRoot(), "devDir", *dev)
		})
	}()
	go func() {
		defer cancel()
		ports <- enactRecord(ctx, log, n, *record, *dev)
	}()
	err = n.ReturnNetdevs(ctx, log, func() { log.Info("watching the node's netdevs", "node", n.Name(), "netns", n.NetnsName()) })
	cancel()
	return errors.Join(err, <-writes, <-ports)
}

// enactRecord enacts the devlink record at path until ctx ends; with no
// path it waits for ctx alone.
func enactRecord(ctx context.Context, log *slog.Logger, n *virtualnode.Node, path, dev string) error {
	if path == "" {
		<-ctx.Done()
		return nil
	}
	return n.EnactDevlinkRecord(ctx, log, path, dev, func() { log.Info("enacting the devlink record's SF ports", "record", path) })
}
