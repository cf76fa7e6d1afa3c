package main

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/agent"
)

// TestParseFlagsRejects: bad flags are errors that name the flag.
func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--poll-interval=-1s"},
		{"--rescan-interval=0s"},
		{"--devinfo-gc-interval=0s"},
		{"--log-format=xml"},
		{"--log-level=loud"},
		{"--vf-admin=ioctl"},
		{"--vf-admin=record:"},
		{"--devlink=ioctl"},
		{"--devlink=record:"},
		{"stray"},
	} {
		_, err := parseFlags(args, io.Discard)
		if err == nil {
			t.Errorf("%v: accepted", args)
			continue
		}
		name := strings.TrimLeft(strings.SplitN(args[0], "=", 2)[0], "-")
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %q does not name %s", args, err, name)
		}
	}
}

// TestParseFlagsRuntimeEconomies: the binary gives its start-up pages
// back and paces its collections unless told not to (the RSS and idle CPU
// in docs/performance.md assume both).
func TestParseFlagsRuntimeEconomies(t *testing.T) {
	for _, tt := range []struct {
		args                []string
		wantRelease, wantGC bool
	}{
		{nil, true, true},
		{[]string{"--release-startup-pages=false"}, false, true},
		{[]string{"--pace-gc=false"}, true, false},
	} {
		c, err := parseFlags(tt.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if c.releaseStartupPages != tt.wantRelease || c.paceGC != tt.wantGC {
			t.Errorf("%v: releaseStartupPages %t, paceGC %t, want %t, %t", tt.args, c.releaseStartupPages, c.paceGC, tt.wantRelease, tt.wantGC)
		}
	}
}

// TestParseFlagsSocketGroup: --socket-group reaches the CNI side, which
// serves both node sockets; unset, they stay root's.
func TestParseFlagsSocketGroup(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{{nil, ""}, {[]string{"--socket-group=61234"}, "61234"}, {[]string{"--socket-group", "hwnet"}, "hwnet"}} {
		c, err := parseFlags(tt.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if c.opts.CNI.SocketGroup != tt.want {
			t.Errorf("%v: SocketGroup %q, want %q", tt.args, c.opts.CNI.SocketGroup, tt.want)
		}
	}
}

// TestParseFlagsVFAdmin: VF settings go through netlink unless the
// recorder is asked for, for the DRA driver and the CNI side alike.
func TestParseFlagsVFAdmin(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "vfadmin.Netlink"},
		{[]string{"--vf-admin=record:/tmp/vf.jsonl"}, "*vfadmin.Recorder"},
	} {
		c, err := parseFlags(tt.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%T", c.opts.VFAdmin); got != tt.want {
			t.Errorf("%v: VF admin %s, want %s", tt.args, got, tt.want)
		}
	}
}

// TestParseFlagsDevlink: PFs' eSwitch modes go through the kernel's
// devlink unless the record is asked for, for discovery and the VF
// layouts alike (one Options field).
func TestParseFlagsDevlink(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "*devlink.Netlink"},
		{[]string{"--devlink=netlink"}, "*devlink.Netlink"},
		{[]string{"--devlink=record:/tmp/devlink.jsonl"}, "*devlink.Record"},
	} {
		c, err := parseFlags(tt.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%T", c.opts.ESwitch); got != tt.want {
			t.Errorf("%v: devlink %s, want %s", tt.args, got, tt.want)
		}
	}
}

// TestParseFlagsLedgerDirs: the device ledger's DRA plugins directory and
// fence directory reach the agent, the agent's defaults unless set.
func TestParseFlagsLedgerDirs(t *testing.T) {
	for _, tt := range []struct {
		args              []string
		wantPlugins, want string
	}{
		{nil, agent.DefaultDRAPluginsDir, agent.DefaultFenceDir},
		{[]string{"--dra-plugins-dir=/k/plugins", "--fence-dir", "/h/fences"}, "/k/plugins", "/h/fences"},
	} {
		c, err := parseFlags(tt.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if c.opts.DRAPluginsDir != tt.wantPlugins || c.opts.FenceDir != tt.want {
			t.Errorf("%v: DRAPluginsDir %q, FenceDir %q; want %q, %q", tt.args, c.opts.DRAPluginsDir, c.opts.FenceDir, tt.wantPlugins, tt.want)
		}
	}
}
