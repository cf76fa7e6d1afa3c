// Command hwnet-test-plugin is hwnet's own CNI plugin for tests. It records
// every invocation (environment and stdin) in "recordFile", keeps one state
// file per attachment in "stateDir" so tests can prove nothing leaked, fails
// on demand ("failOn"), and answers ADD as sriov-cni ("personality": "sriov")
// or ib-sriov-cni ("ib-sriov") do, so the delegating plugin's contract with
// them can be tested on machines without VFs. IPAM is delegated as sriov-cni
// delegates it.
//
// It imports nothing from hwnet, so that cniplugins.Dir can tell from this
// directory's files alone whether its cached build is current.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

func main() {
	ctx := context.Background()
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    func(args *skel.CmdArgs) error { return cmdAdd(ctx, args) },
		Del:    func(args *skel.CmdArgs) error { return cmdDel(ctx, args) },
		Check:  func(args *skel.CmdArgs) error { return cmdCheck(ctx, args) },
		GC:     func(args *skel.CmdArgs) error { return cmdGC(ctx, args) },
		Status: func(args *skel.CmdArgs) error { return cmdStatus(args) },
	}, version.All, "hwnet-test-plugin: records CNI calls and answers as sriov-cni, ib-sriov-cni or a plain plugin")
}

// load decodes the configuration, records the call, then validates it and
// fails if "failOn" names cmd: in that order, so that every call is recorded.
func load(cmd string, args *skel.CmdArgs) (*netConf, error) {
	conf, err := decodeNetConf(args.StdinData)
	if err != nil {
		return nil, err
	}
	if conf.RecordFile != "" {
		if err := appendRecord(conf.RecordFile, cmd, args.StdinData, time.Now()); err != nil {
			return nil, err
		}
	}
	if err := conf.validate(); err != nil {
		return nil, err
	}
	if slices.Contains(conf.HangOn, cmd) {
		// Until the caller kills the process; select{} would end it as a
		// deadlock.
		time.Sleep(24 * time.Hour)
	}
	return conf, conf.failure(cmd)
}

func cmdAdd(ctx context.Context, args *skel.CmdArgs) error {
	conf, err := load("ADD", args)
	if err != nil {
		return err
	}
	if err := conf.requireDevice(); err != nil {
		return err
	}
	if err := waitFor(ctx, conf.WaitFor); err != nil {
		return err
	}
	var ipamResult types.Result
	if conf.IPAM.Type != "" {
		if ipamResult, err = invoke.DelegateAdd(ctx, conf.IPAM.Type, args.StdinData, nil); err != nil {
			return err
		}
	}
	err = attach(conf, args, ipamResult)
	if err != nil && conf.IPAM.Type != "" {
		// A failed ADD must not keep the address it was given.
		err = errors.Join(err, invoke.DelegateDel(ctx, conf.IPAM.Type, args.StdinData, nil))
	}
	return err
}

// attach records the attachment's state and prints its result.
func attach(conf *netConf, args *skel.CmdArgs, ipamResult types.Result) error {
	result, err := buildResult(conf, args.IfName, args.Netns, ipamResult)
	if err != nil {
		return err
	}
	if err := stateDir(conf.StateDir).add(args.ContainerID, args.IfName, conf.DeviceID); err != nil {
		return err
	}
	return printResult(result, conf.CNIVersion)
}

// waitFor returns once the file at path exists; at once for "".
func waitFor(ctx context.Context, path string) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for path != "" {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

func cmdDel(ctx context.Context, args *skel.CmdArgs) error {
	conf, err := load("DEL", args)
	if err != nil {
		return err
	}
	if conf.IPAM.Type != "" {
		if err := invoke.DelegateDel(ctx, conf.IPAM.Type, args.StdinData, nil); err != nil {
			return err
		}
	}
	return stateDir(conf.StateDir).del(args.ContainerID, args.IfName)
}

func cmdCheck(ctx context.Context, args *skel.CmdArgs) error {
	conf, err := load("CHECK", args)
	if err != nil {
		return err
	}
	if err := stateDir(conf.StateDir).check(args.ContainerID, args.IfName); err != nil {
		return err
	}
	if conf.hasDevice() {
		if err := checkInterface(conf, args.IfName, args.Netns); err != nil {
			return err
		}
	}
	if conf.IPAM.Type != "" {
		return invoke.DelegateCheck(ctx, conf.IPAM.Type, args.StdinData, nil)
	}
	return nil
}

// checkInterface verifies that prevResult still lists the interface ADD
// returned, with the address the current runtimeConfig asks for.
func checkInterface(conf *netConf, ifName, netns string) error {
	if conf.PrevResult == nil {
		return fmt.Errorf("CHECK of %s needs a \"prevResult\"", ifName)
	}
	prev, err := types100.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return fmt.Errorf("netconf \"prevResult\": %w", err)
	}
	want, err := sandboxInterface(conf, ifName, netns)
	if err != nil {
		return err
	}
	for _, iface := range prev.Interfaces {
		if iface.Name == want.Name && iface.Sandbox == want.Sandbox {
			if iface.Mac != want.Mac {
				return fmt.Errorf("interface %s has mac %s in prevResult, want %s", ifName, iface.Mac, want.Mac)
			}
			return nil
		}
	}
	return fmt.Errorf("prevResult has no interface %s in %s", ifName, netns)
}

func cmdGC(ctx context.Context, args *skel.CmdArgs) error {
	conf, err := load("GC", args)
	if err != nil {
		return err
	}
	if err := stateDir(conf.StateDir).gc(conf.ValidAttachments); err != nil {
		return err
	}
	if conf.IPAM.Type != "" {
		return invoke.DelegateGC(ctx, conf.IPAM.Type, args.StdinData, nil)
	}
	return nil
}

func cmdStatus(args *skel.CmdArgs) error {
	_, err := load("STATUS", args)
	return err
}
