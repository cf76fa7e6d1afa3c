package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/crinet"
)

// defaultNetworkSocket is hwnet-agent's --cri-network-socket default.
const defaultNetworkSocket = "/run/hwnet/cri-network.sock"

func runNetwork(ctx context.Context, args []string, out, errOut io.Writer) error {
	subs := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"set":    setNetwork,
		"remove": removeNetwork,
		"list":   listNetworks,
	}
	if len(args) == 0 {
		return usageError{"want a subcommand: set, remove or list"}
	}
	if isHelp(args[0]) {
		subcommandUsage(out, "network", "set", "remove", "list")
		return nil
	}
	sub, ok := subs[args[0]]
	if !ok {
		return usageError{fmt.Sprintf("unknown subcommand %q (want set, remove or list)", args[0])}
	}
	return sub(ctx, args[1:], out, errOut)
}

// networkClient holds the flags every network subcommand shares.
type networkClient struct {
	socket  string
	timeout time.Duration
}

func (c *networkClient) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.socket, "socket", defaultNetworkSocket, "hwnet-agent's CRI network API socket (--cri-network-socket)")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long to wait for the agent")
}

// call dials the agent and runs f with a client, bounded by the timeout.
func (c *networkClient) call(ctx context.Context, f func(context.Context, crinetapi.RuntimeServiceClient) error) error {
	conn, err := grpc.NewClient("unix://"+c.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("--socket %s: %w", c.socket, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err = f(ctx, crinetapi.NewRuntimeServiceClient(conn))
	if s, ok := grpcstatus.FromError(err); ok && err != nil {
		return fmt.Errorf("%s: %s", s.Code(), s.Message())
	}
	return err
}

func setNetwork(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("network set", errOut)
	var c networkClient
	c.flags(fs)
	file := fs.String("f", "", "the NetworkConfig, YAML or JSON (docs/cri-network-api.md); - for stdin")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usageError{"-f FILE is required"}
	}
	cfg, err := readNetworkFile(*file)
	if err != nil {
		return err
	}
	return c.call(ctx, func(ctx context.Context, client crinetapi.RuntimeServiceClient) error {
		resp, err := client.SetPodNetwork(ctx, &crinetapi.SetPodNetworkRequest{Config: cfg})
		if err != nil {
			return err
		}
		md := resp.GetConfig().GetMetadata()
		fmt.Fprintf(out, "network %s/%s set: generation %d, uid %s\n", md.GetNamespace(), md.GetName(), md.GetGeneration(), md.GetUid())
		return nil
	})
}

func readNetworkFile(file string) (*crinetapi.NetworkConfig, error) {
	data, err := readInput(file)
	if err != nil {
		return nil, fmt.Errorf("-f: %w", err)
	}
	cfg, err := crinet.ParseConfigFile(data)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", file, err)
	}
	return cfg, nil
}

func removeNetwork(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("network remove", errOut)
	var c networkClient
	c.flags(fs)
	namespace := fs.String("namespace", crinet.DefaultNamespace, "the network's namespace (or give NAMESPACE/NAME)")
	generation := fs.Uint("generation", 0, "remove only if this is the network's current generation (0: any)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"want one network: hwnetctl network remove [flags] [NAMESPACE/]NAME"}
	}
	ns, name := *namespace, fs.Arg(0)
	if before, after, ok := strings.Cut(name, "/"); ok {
		ns, name = before, after
	}
	md := &crinetapi.NetworkMetadata{Namespace: ns, Name: name, Generation: uint32(*generation)}
	return c.call(ctx, func(ctx context.Context, client crinetapi.RuntimeServiceClient) error {
		if _, err := client.RemovePodNetwork(ctx, &crinetapi.RemovePodNetworkRequest{Metadata: md}); err != nil {
			return err
		}
		fmt.Fprintf(out, "network %s/%s removed\n", ns, name)
		return nil
	})
}

func listNetworks(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("network list", errOut)
	var c networkClient
	c.flags(fs)
	format := fs.String("o", "table", "output: table or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return usageError{fmt.Sprintf("-o %q: want table or json", *format)}
	}
	return c.call(ctx, func(ctx context.Context, client crinetapi.RuntimeServiceClient) error {
		resp, err := client.ListPodNetwork(ctx, &crinetapi.ListPodNetworkRequest{})
		if err != nil {
			return err
		}
		if *format == "json" {
			b, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(resp)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(out, string(b))
			return err
		}
		return renderNetworks(out, resp)
	})
}

// renderNetworks writes one row per network, then one per pod attachment
// with its IPs.
func renderNetworks(w io.Writer, resp *crinetapi.ListPodNetworkResponse) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NETWORK\tGENERATION\tPLUGINS\tSANDBOX-MANAGEMENT\tCONNECTIVITY\tPODS\tREASON")
	for _, n := range resp.GetNetworks() {
		st := n.GetStatus()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%t\t%d\t%s\n", networkName(n.GetConfig().GetMetadata()),
			generation(n.GetConfig().GetMetadata()), plugins(n.GetConfig()), st.GetSandboxManagement(),
			st.GetConnectivity(), len(n.GetPods()), dash(st.GetReason()))
	}
	fmt.Fprintln(tw, "\nPOD\tNETWORK\tINTERFACE\tIPS")
	for _, n := range resp.GetNetworks() {
		for _, p := range n.GetPods() {
			fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\n", p.GetPodNamespace(), p.GetPodName(),
				networkName(n.GetConfig().GetMetadata()), p.GetInterfaceName(), podIPs(p))
		}
	}
	return tw.Flush()
}

func networkName(md *crinetapi.NetworkMetadata) string {
	if md.GetNamespace() == "" {
		return md.GetName()
	}
	return md.GetNamespace() + "/" + md.GetName()
}

func generation(md *crinetapi.NetworkMetadata) string {
	if md.GetGeneration() == 0 {
		return "-"
	}
	return strconv.FormatUint(uint64(md.GetGeneration()), 10)
}

func plugins(cfg *crinetapi.NetworkConfig) string {
	var types []string
	for _, p := range cfg.GetCniv1Config().GetPlugins() {
		types = append(types, p.GetType())
	}
	return dash(strings.Join(types, ","))
}

func podIPs(p *crinetapi.PodAttachment) string {
	var ips []string
	for _, ip := range p.GetIps() {
		ips = append(ips, ip.GetIp())
	}
	return dash(strings.Join(ips, ","))
}
