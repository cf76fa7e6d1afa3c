package ctl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/api/selection"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/status"
	"github.com/hwnet-io/hwnet/node/podresources"
)

// nodeTimeout bounds the talk with kubelet's PodResources API, which is
// only there when hwnetctl runs on the pod's node.
const nodeTimeout = 2 * time.Second

// explainSources is where explain looks.
type explainSources struct {
	client       kubernetes.Interface
	nads         nadclient.Interface
	podResources string // kubelet's socket; skipped when absent
	cacheDir     string // hwnet's records; skipped when absent
}

func runExplain(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("explain", errOut)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server (default: $KUBECONFIG, else in-cluster)")
	podRes := fs.String("pod-resources-socket", podresources.DefaultSocket, "kubelet's PodResources API, read when run on the pod's node")
	cache := fs.String("cni-cache-dir", pluginconf.DefaultCacheDir, "hwnet's attachment records, read when run on the pod's node")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: hwnetctl explain pod NAMESPACE/NAME\n\nThe pod's networks, their resources, the devices kubelet gave, what hwnet attached, its status and Events.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 || fs.Arg(0) != "pod" {
		return usageError{"want: explain pod NAMESPACE/NAME"}
	}
	ns, name, ok := strings.Cut(fs.Arg(1), "/")
	if !ok || ns == "" || name == "" {
		return usageError{fmt.Sprintf("pod %q: want NAMESPACE/NAME", fs.Arg(1))}
	}
	cfg, client, err := kubeClient(*kubeconfig)
	if err != nil {
		return err
	}
	nads, err := nadclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return explainPod(ctx, out, explainSources{client: client, nads: nads, podResources: *podRes, cacheDir: *cache}, ns, name)
}

// explainPod writes the pod's path from its annotation to its status.
func explainPod(ctx context.Context, out io.Writer, src explainSources, ns, name string) error {
	pod, err := src.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintf(w, "Pod %s/%s\tnode %s\tphase %s\n", ns, name, pod.Spec.NodeName, pod.Status.Phase)
	explainNetworks(ctx, w, src, pod)
	explainRequests(w, pod)
	explainDevices(ctx, w, src.podResources, pod)
	explainRecords(w, src.cacheDir, pod)
	explainStatus(w, pod)
	return explainEvents(ctx, w, src.client, pod)
}

func explainNetworks(ctx context.Context, w io.Writer, src explainSources, pod *corev1.Pod) {
	if refs, ok := pod.Annotations[mnv1.NetworksAnnotation]; ok {
		explainPodNetworks(w, pod, refs)
	}
	value, ok := pod.Annotations[selection.Annotation]
	if !ok {
		fmt.Fprintf(w, "\nNetworks: none selected (no %s annotation)\n", selection.Annotation)
		return
	}
	fmt.Fprintf(w, "\nNetworks (%s):\n", selection.Annotation)
	sels, err := selection.Parse(value, pod.Namespace)
	if err != nil {
		fmt.Fprintf(w, "  invalid: %v\n", err)
		return
	}
	for _, s := range sels {
		resource := "-"
		nad, err := src.nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			resource = "NAD: " + err.Error()
		case nad.Annotations[cache.ResourceNameAnnotation] != "":
			resource = nad.Annotations[cache.ResourceNameAnnotation]
		}
		fmt.Fprintf(w, "  %s/%s\tinterface %s\tresource %s\n", s.Namespace, s.Name, orDash(s.Interface), resource)
	}
}

// explainPodNetworks lists the pod's KEP-3698 references and what it got
// of them (docs/multinetwork.md).
func explainPodNetworks(w io.Writer, pod *corev1.Pod, refs string) {
	fmt.Fprintf(w, "\nPodNetworks (%s):\n", mnv1.NetworksAnnotation)
	nets, err := mnv1.ParseNetworks(refs)
	if err != nil {
		fmt.Fprintf(w, "  invalid: %v\n", err)
		return
	}
	for _, n := range nets {
		ref := "PodNetwork " + n.Name
		if n.AttachmentName != "" {
			ref = "PodNetworkAttachment " + pod.Namespace + "/" + n.AttachmentName
		}
		fmt.Fprintf(w, "  %s\tinterface %s\tdefault gateway %t\n", ref, orDash(n.InterfaceName), n.IsDefaultGW)
	}
	for _, g := range pod.Spec.SchedulingGates {
		fmt.Fprintf(w, "  waiting: scheduling gate %s (hwnet-controller lifts it once every network is Ready; see Events)\n", g.Name)
	}
	if st := pod.Annotations[mnv1.NetworksStatusAnnotation]; st != "" {
		fmt.Fprintf(w, "  status (%s): %s\n", mnv1.NetworksStatusAnnotation, st)
	}
}

func explainRequests(w io.Writer, pod *corev1.Pod) {
	fmt.Fprintln(w, "\nResources requested:")
	listed := false
	for _, c := range pod.Spec.Containers {
		for res, q := range c.Resources.Limits {
			if strings.Contains(string(res), "/") {
				fmt.Fprintf(w, "  %s\t%s=%s\n", c.Name, res, q.String())
				listed = true
			}
		}
	}
	if !listed {
		fmt.Fprintln(w, "  no extended resources")
	}
}

func explainDevices(ctx context.Context, w io.Writer, socket string, pod *corev1.Pod) {
	fmt.Fprintln(w, "\nDevices kubelet gave (PodResources):")
	if _, err := os.Stat(socket); err != nil {
		fmt.Fprintf(w, "  not read: %s is not here (run hwnetctl on node %s)\n", socket, pod.Spec.NodeName)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, nodeTimeout)
	defer cancel()
	c, err := podresources.Dial(ctx, socket)
	if err == nil {
		defer c.Close()
		var got podresources.Pod
		if got, err = c.Get(ctx, pod.Namespace, pod.Name); err == nil {
			for _, ctr := range got.Containers {
				for _, res := range slices.Sorted(maps.Keys(ctr.Devices)) {
					fmt.Fprintf(w, "  %s\t%s\t%s\n", ctr.Name, res, strings.Join(ctr.Devices[res], ", "))
				}
			}
			return
		}
	}
	fmt.Fprintf(w, "  not read: %v\n", err)
}

func explainRecords(w io.Writer, cacheDir string, pod *corev1.Pod) {
	fmt.Fprintf(w, "\nAttached by hwnet (records in %s):\n", cacheDir)
	store := attachments.NewStore(cacheDir)
	ids, err := store.List()
	if err != nil {
		fmt.Fprintf(w, "  not read: %v\n", err)
		return
	}
	found := false
	for _, id := range ids {
		rec, err := store.Load(id)
		if err != nil || rec.PodNamespace != pod.Namespace || rec.PodName != pod.Name {
			continue
		}
		found = true
		for _, a := range rec.Attachments {
			done := "ADD done"
			if len(a.Result) == 0 {
				done = "ADD unfinished"
			}
			fmt.Fprintf(w, "  sandbox %.12s\t%s\t%s\tdevice %s %s\t%s\n", id, a.Network, a.IfName, orDash(a.Resource), orDash(a.DeviceID), done)
		}
	}
	if !found {
		fmt.Fprintln(w, "  none on this host")
	}
}

func explainStatus(w io.Writer, pod *corev1.Pod) {
	fmt.Fprintf(w, "\nStatus (%s):\n", status.Annotation)
	list, err := status.Decode(pod.Annotations[status.Annotation])
	if err != nil || len(list) == 0 {
		fmt.Fprintf(w, "  none: %v\n", orNone(err))
		return
	}
	for _, s := range list {
		device := "-"
		if s.DeviceInfo != nil && s.DeviceInfo.PCI != nil {
			device = s.DeviceInfo.PCI.PCIAddress
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\tmac %s\tdevice %s\tdefault %t\n", s.Name, orDash(s.Interface), orDash(strings.Join(s.IPs, ",")), orDash(s.MAC), device, s.Default)
	}
}

func explainEvents(ctx context.Context, w io.Writer, client kubernetes.Interface, pod *corev1.Pod) error {
	list, err := client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod.Name})
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	fmt.Fprintln(w, "\nEvents:")
	short := map[string]bool{}
	for _, e := range list.Items {
		if e.InvolvedObject.UID == pod.UID || e.InvolvedObject.UID == "" {
			fmt.Fprintf(w, "  %s\t%s\t%s\n", e.Type, e.Reason, e.Message)
			for _, res := range shortOf(pod, e.Message) {
				short[res] = true
			}
		}
	}
	for _, res := range slices.Sorted(maps.Keys(short)) {
		fmt.Fprintf(w, "  hint: no node had a free %s: on the node meant to serve it, hwnetctl doctor --config FILE says what keeps its pool empty\n", res)
	}
	return nil
}

// shortOf returns the pod's extended resources a scheduler message says
// no node had enough of ("Insufficient intel.com/sriov_a").
func shortOf(pod *corev1.Pod, message string) []string {
	var out []string
	for _, c := range pod.Spec.Containers {
		for res := range c.Resources.Limits {
			if strings.Contains(string(res), "/") && strings.Contains(message, "Insufficient "+string(res)) {
				out = append(out, string(res))
			}
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(err error) string {
	if err == nil {
		return "not written yet"
	}
	return err.Error()
}
