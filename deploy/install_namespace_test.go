package deploy_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// installNamespace is a namespace of the admin's choosing, not the
// kube-system the kustomize base names.
const installNamespace = "hwnet-system"

// identityKinds are the kinds that make hwnet's identities and narrow
// them: what the identity matrix needs of an install.
var identityKinds = []string{
	"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}

// renderedInstall installs the identity objects of a rendered install.
func renderedInstall(name string, objs map[string]*unstructured.Unstructured) install {
	var keep []*unstructured.Unstructured
	for _, key := range slices.Sorted(maps.Keys(objs)) {
		if slices.Contains(identityKinds, objs[key].GetKind()) {
			keep = append(keep, objs[key])
		}
	}
	return install{name: name, namespace: installNamespace, apply: func(t *testing.T, api *kubeapi.Server) {
		api.ApplyObjects(t, keep)
	}}
}

// overlayInstall is the kustomize base under an overlay that sets only
// its namespace, as an admin writes it. The overlay lives outside deploy/
// (kustomize refuses a base that contains its overlay).
func overlayInstall(t *testing.T, kubectl string) install {
	t.Helper()
	dir := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, wd)
	if err != nil {
		t.Fatal(err)
	}
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + installNamespace +
		"\nresources:\n  - " + filepath.ToSlash(base) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	return renderedInstall("kustomize overlay", objects(t, command(t, kubectl, "kustomize", dir)))
}

// helmInstall is the chart as `helm install --namespace hwnet-system`
// renders it.
func helmInstall(t *testing.T, helm string) install {
	t.Helper()
	return renderedInstall("helm", objects(t, command(t, helm, "template", "hwnet", "helm/hwnet", "--namespace", installNamespace)))
}

// TestPoliciesHoldInTheInstallNamespace: hwnet installed into
// hwnet-system, by a kustomize overlay whose namespace: is all it
// changes or by Helm, and every policy still holds its identity: the
// identity matrix again, with the tokens of the service accounts in
// hwnet-system. The API server narrows no claim status itself here (as
// 1.34), so hwnet's policy alone refuses those writes too.
func TestPoliciesHoldInTheInstallNamespace(t *testing.T) {
	kubectl := tool(t, "HWNET_KUBECTL", "kubectl", filepath.Join(kubeapi.Binaries(t), "kubectl"))
	helm := tool(t, "HWNET_HELM", "helm", defaultHelm)
	for _, inst := range []install{overlayInstall(t, kubectl), helmInstall(t, helm)} {
		t.Run(inst.name, func(t *testing.T) {
			e := startIdentityAPI(t, inst, granularOff)
			t.Run("agent", e.agentWrites)
			t.Run("claim status", func(t *testing.T) { e.claimWrites(t, false) })
			t.Run("controller", e.controllerWrites)
		})
	}
}
