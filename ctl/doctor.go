package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/cni/readiness"
	"github.com/hwnet-io/hwnet/node/doctor"
	"github.com/hwnet-io/hwnet/node/handout"
	"github.com/hwnet-io/hwnet/node/podresources"
	"github.com/hwnet-io/hwnet/node/pools"
)

// Exit codes of hwnetctl doctor beyond 0 (nothing, or only notes), 1 (it
// could not look) and 2 (usage), so a script can tell them apart.
const (
	doctorWarnings = 3
	doctorErrors   = 4
)

// exitCode ends hwnetctl with code, having said everything already.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

func runDoctor(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("doctor", errOut)
	file := fs.String("config", "", "pool config to check the node against (sriovdp's config.json, or YAML; - reads standard input); without it, the hardware alone")
	df := addDiscoveryFlags(fs)
	kubeletConfig := fs.String("kubelet-config", "/var/lib/kubelet/config.yaml", "kubelet's configuration file, for its topology manager policy (\"\" skips)")
	socket := fs.String("pod-resources-socket", podresources.DefaultSocket, "kubelet's PodResources socket, as hwnet-agent's flag of that name (\"\" skips)")
	cdiDir := fs.String("cdi-dir", handout.DefaultCDIDir, "the runtime's CDI spec directory, as hwnet-agent's flag of that name")
	cniDir := fs.String("cni-conf-dir", daemon.DefaultConfDir, "the runtime's CNI configuration directory (\"\" skips)")
	format := fs.String("o", "table", "output format: table or json")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: hwnetctl doctor [flags]\n\nChecks, read-only, what keeps this node from serving its SR-IOV pools. Exit status: 0 nothing\nfound (or notes only), 3 warnings, 4 errors, 1 the check could not run, 2 a usage mistake.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case *format != "table" && *format != "json":
		return usageError{fmt.Sprintf("-o: unknown output format %q (want table or json)", *format)}
	}
	n := doctor.Node{SysfsRoot: *df.sysfs, KubeletConfig: *kubeletConfig, PodResourcesSocket: *socket, CDIDir: *cdiDir}
	if *file != "" {
		cfg, err := loadPoolConfig(*file)
		if err != nil {
			return indented{err}
		}
		n.Config = cfg
	}
	inv, _, err := df.discover(ctx)
	if err != nil {
		return err
	}
	n.Inventory = inv
	findings := append(doctor.Check(ctx, n), cniOrder(*cniDir)...)
	doctor.Sort(findings)
	if err := renderFindings(out, *format, findings); err != nil {
		return err
	}
	return exitFor(doctor.Worst(findings))
}

// loadPoolConfig reads the pool config from file, or standard input for "-".
func loadPoolConfig(file string) (*pools.Config, error) {
	data, err := readInput(file)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	cfg, err := pools.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", file, err)
	}
	return cfg, nil
}

// exitFor is the exit status a script reads for the worst finding.
func exitFor(worst doctor.Severity) error {
	switch worst {
	case doctor.Error:
		return exitCode(doctorErrors)
	case doctor.Warning:
		return exitCode(doctorWarnings)
	}
	return nil
}

// cniOrder: the runtime uses the configuration that sorts first; when it
// is not hwnet's, pods get no secondary networks from hwnet.
func cniOrder(dir string) []doctor.Finding {
	if dir == "" {
		return nil
	}
	files, err := netconf.ConfigFiles(dir, nil, readiness.ConfExtensions()...)
	switch {
	case err != nil:
		return []doctor.Finding{{Severity: doctor.Info, Check: "cni", Subject: dir, Message: err.Error()}}
	case len(files) == 0:
		return []doctor.Finding{{Severity: doctor.Error, Check: "cni", Subject: dir,
			Message: "no CNI configuration: the runtime starts no pod with a network",
			Fix:     "install the cluster's default network (its CNI plugin writes its configuration here)"}}
	}
	first := filepath.Base(files[0])
	if first == daemon.DefaultConfFileName {
		return nil
	}
	for _, f := range files {
		if filepath.Base(f) == daemon.DefaultConfFileName {
			return []doctor.Finding{{Severity: doctor.Warning, Check: "cni", Subject: dir,
				Message: fmt.Sprintf("the runtime uses %s, which sorts before hwnet's %s: pods get no secondary networks", first, daemon.DefaultConfFileName),
				Fix:     fmt.Sprintf("rename %s so that it sorts after %s (hwnet-agent delegates to it as the default network)", first, daemon.DefaultConfFileName)}}
		}
	}
	return []doctor.Finding{{Severity: doctor.Info, Check: "cni", Subject: dir,
		Message: fmt.Sprintf("the runtime uses %s; hwnet's %s is not there (its CNI side is off, or hwnet-agent has not written it yet)", first, daemon.DefaultConfFileName)}}
}

func renderFindings(out io.Writer, format string, findings []doctor.Finding) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Findings []doctor.Finding `json:"findings"`
		}{append([]doctor.Finding{}, findings...)})
	}
	if len(findings) == 0 {
		_, err := fmt.Fprintln(out, "nothing found: the node is ready for its pools")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEVERITY\tCHECK\tSUBJECT\tFINDING")
	for _, f := range findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Severity, f.Check, f.Subject, f.Message)
		if f.Fix != "" {
			fmt.Fprintf(tw, "\t\t\tfix: %s\n", f.Fix)
		}
	}
	return tw.Flush()
}
