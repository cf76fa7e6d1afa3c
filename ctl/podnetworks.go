package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/internal/kubeclient"
)

// podNetworkView is one PodNetwork as podnetworks shows it: its
// conditions, and who uses it (the controller's in-use rule).
type podNetworkView struct {
	Name        string             `json:"name"`
	Enabled     bool               `json:"enabled"`
	Provider    string             `json:"provider,omitempty"`
	Parameters  []string           `json:"parameters,omitempty"`
	Conditions  []metav1.Condition `json:"conditions"`
	Terminating bool               `json:"terminating,omitempty"`
	Attachments []string           `json:"attachments,omitempty"`
	Pods        []string           `json:"pods,omitempty"`
}

func runPodNetworks(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("podnetworks", errOut)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server (default: $KUBECONFIG, else in-cluster)")
	format := fs.String("o", "table", "output format: table or json")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: hwnetctl podnetworks [flags]\n\nThe KEP-3698 PodNetworks: enabled, Ready and ParamsReady with their reasons, parameters, and the attachments and pods that use each.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return usageError{fmt.Sprintf("-o %q: want table or json", *format)}
	}
	cfg, client, err := kubeClient(*kubeconfig)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	views, err := podNetworkViews(ctx, client, dyn)
	if err != nil {
		return err
	}
	if *format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(views)
	}
	return renderPodNetworks(out, views)
}

// podNetworkViews reads the PodNetworks, their attachments and every pod.
func podNetworkViews(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) ([]podNetworkView, error) {
	pnList, err := dyn.Resource(mnv1.PodNetworkResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list PodNetworks: %w", err)
	}
	pnaList, err := dyn.Resource(mnv1.PodNetworkAttachmentResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list PodNetworkAttachments: %w", err)
	}
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	networkOf := map[string]string{} // attachment ns/name -> its PodNetwork
	users := map[string][]string{}   // PodNetwork -> attachments and pods
	for i := range pnaList.Items {
		pna, err := mnv1.FromUnstructured[mnv1.PodNetworkAttachment](&pnaList.Items[i])
		if err != nil {
			return nil, err
		}
		key := pna.Namespace + "/" + pna.Name
		networkOf[key] = pna.Spec.PodNetworkName
		users[pna.Spec.PodNetworkName] = append(users[pna.Spec.PodNetworkName], "pna:"+key)
	}
	for _, pod := range pods.Items {
		for _, n := range mnv1.PodUses(&pod) {
			pn, via := n.Name, ""
			if n.AttachmentName != "" {
				pn, via = networkOf[pod.Namespace+"/"+n.AttachmentName], " via "+n.AttachmentName
			}
			users[pn] = append(users[pn], "pod:"+pod.Namespace+"/"+pod.Name+via)
		}
	}
	views := make([]podNetworkView, 0, len(pnList.Items))
	for i := range pnList.Items {
		pn, err := mnv1.FromUnstructured[mnv1.PodNetwork](&pnList.Items[i])
		if err != nil {
			return nil, err
		}
		views = append(views, newPodNetworkView(pn, users[pn.Name]))
	}
	return views, nil
}

func newPodNetworkView(pn *mnv1.PodNetwork, users []string) podNetworkView {
	v := podNetworkView{Name: pn.Name, Enabled: pn.Spec.IsEnabled(), Provider: pn.Spec.Provider,
		Conditions: pn.Status.Conditions, Terminating: pn.DeletionTimestamp != nil}
	for _, r := range pn.Spec.ParametersRefs {
		v.Parameters = append(v.Parameters, fmt.Sprintf("%s/%s %s/%s", r.Group, r.Kind, r.Namespace, r.Name))
	}
	for _, u := range users {
		if name, ok := strings.CutPrefix(u, "pna:"); ok {
			v.Attachments = append(v.Attachments, name)
		} else {
			v.Pods = append(v.Pods, strings.TrimPrefix(u, "pod:"))
		}
	}
	slices.Sort(v.Pods)
	return v
}

func renderPodNetworks(out io.Writer, views []podNetworkView) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PODNETWORK\tENABLED\tREADY\tPARAMS\tPROVIDER\tATTACHMENTS\tPODS")
	for _, v := range views {
		ready := conditionCell(v.Conditions, mnv1.ConditionReady)
		if v.Terminating {
			ready += " (Terminating)"
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%d\t%d\n", v.Name, v.Enabled, ready,
			conditionCell(v.Conditions, mnv1.ConditionParamsReady), dash(v.Provider), len(v.Attachments), len(v.Pods))
	}
	for _, v := range views {
		if len(v.Parameters)+len(v.Attachments)+len(v.Pods) == 0 && mnv1.NotReady(v.Conditions) == nil {
			continue
		}
		fmt.Fprintf(tw, "\n%s:\n", v.Name)
		if err := mnv1.NotReady(v.Conditions); err != nil {
			fmt.Fprintf(tw, "  not Ready:\t%v\n", err)
		}
		for _, p := range v.Parameters {
			fmt.Fprintf(tw, "  parameters:\t%s\n", p)
		}
		for _, a := range v.Attachments {
			fmt.Fprintf(tw, "  attachment:\t%s\n", a)
		}
		for _, p := range v.Pods {
			fmt.Fprintf(tw, "  pod:\t%s\n", p)
		}
	}
	return tw.Flush()
}

// conditionCell is "True", "False (Reason)" or "-".
func conditionCell(conds []metav1.Condition, typ string) string {
	c := meta.FindStatusCondition(conds, typ)
	switch {
	case c == nil:
		return "-"
	case c.Status == metav1.ConditionTrue:
		return string(c.Status)
	}
	return fmt.Sprintf("%s (%s)", c.Status, c.Reason)
}

// kubeClient is the API server's configuration from kubeconfig (in-cluster
// when empty) and a client of it, for the commands that ask the cluster.
func kubeClient(kubeconfig string) (*rest.Config, kubernetes.Interface, error) {
	cfg, err := kubeclient.RESTConfig(kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cfg, client, nil
}
