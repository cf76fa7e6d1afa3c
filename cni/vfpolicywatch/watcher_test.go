package vfpolicywatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/api/vfpolicy"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/cni/vfpolicywatch"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/vfpolicytest"
)

const teamA = `{"rules": [
	{"name": "team-a", "namespaces": ["team-a"], "allow": {"vlans": [{"min": 100, "max": 199}]}},
	{"name": "tenants", "namespaceSelector": {"matchLabels": {"hwnet.io/tenant": "b"}}, "allow": {"trust": true}}]}`

func vlan(v int) vfsettings.Settings { return vfsettings.Settings{VLAN: &v} }

var trustOn = vfsettings.Settings{Trust: func() *bool { on := true; return &on }()}

// checkEventually waits until Check of the settings in namespace gives
// want ("" for allowed).
func checkEventually(t *testing.T, w interface {
	Check(string, vfsettings.Settings, vfpolicy.Spelling) error
}, namespace string, s vfsettings.Settings, want string) {
	t.Helper()
	var last error
	vfpolicytest.WaitFor(t, "Check to give "+want, func() bool {
		last = w.Check(namespace, s, vfpolicy.NADSpelling)
		if want == "" {
			return last == nil
		}
		return last != nil && strings.Contains(last.Error(), want)
	})
	var r *vfpolicy.Refusal
	if want != "" && !errors.As(last, &r) {
		t.Fatalf("Check: %v is no Refusal", last)
	}
}

// TestWatcher: the policy is unknown, and every setting refused, until
// the CRD is served and listed, while the object is absent, invalid or
// deleted; the object's rules judge once read, and a namespace's labels
// as they change.
func TestWatcher(t *testing.T) {
	kubeapi.Binaries(t)
	s := kubeapi.Start(t)
	s.CreateNamespace(t, "team-a")
	s.CreateNamespace(t, "b-prod")

	early := startUnsynced(t, s)
	if err := early.Check("team-a", vlan(150), vfpolicy.NADSpelling); err == nil ||
		!strings.Contains(err.Error(), "VF setting vlan=150 refused for namespace team-a: VFSettingsPolicy hwnet is unknown (not read from the API server yet") {
		t.Fatalf("before the CRD: %v", err)
	}
	if err := early.Check("team-a", vfsettings.Settings{}, vfpolicy.NADSpelling); err != nil {
		t.Fatalf("no settings asked: %v", err)
	}

	vfpolicytest.InstallCRD(t, s)
	w := vfpolicytest.Watch(t, s)
	checkEventually(t, w, "team-a", vlan(150), "VF setting vlan=150 refused for namespace team-a: VFSettingsPolicy hwnet is unknown (no VFSettingsPolicy named hwnet exists)")

	vfpolicytest.Set(t, s, teamA)
	checkEventually(t, w, "team-a", vlan(150), "")
	checkEventually(t, w, "team-a", vlan(300), "VF setting vlan=300 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a")
	checkEventually(t, w, "b-prod", trustOn, "VF setting trust=on refused by VFSettingsPolicy hwnet: no rule for namespace b-prod")

	label(t, s, "b-prod", map[string]string{"hwnet.io/tenant": "b"})
	checkEventually(t, w, "b-prod", trustOn, "")
	label(t, s, "b-prod", nil)
	checkEventually(t, w, "b-prod", trustOn, "no rule for namespace b-prod")

	vfpolicytest.Set(t, s, `{"rules": [{"name": "a", "namespaces": ["team-a"]}, {"name": "a"}]}`)
	checkEventually(t, w, "team-a", vlan(150), `VFSettingsPolicy hwnet is unknown (invalid: VFSettingsPolicy hwnet: spec.rules[1].name "a": rule 0 has it already)`)

	vfpolicytest.Set(t, s, teamA)
	checkEventually(t, w, "team-a", vlan(150), "")
	vfpolicytest.Delete(t, s)
	checkEventually(t, w, "team-a", vlan(150), "VFSettingsPolicy hwnet is unknown (no VFSettingsPolicy named hwnet exists)")
}

// startUnsynced runs a watcher without waiting for it to list.
func startUnsynced(t *testing.T, s *kubeapi.Server) interface {
	Check(string, vfsettings.Settings, vfpolicy.Spelling) error
} {
	t.Helper()
	w := vfpolicytest.New(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func label(t *testing.T, s *kubeapi.Server, name string, labels map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := s.Client().CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels = labels
	if _, err := s.Client().CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestWatcherFollowsLabelsOnlyForSelectors: a policy that names its
// namespaces has the watcher ask nothing of the namespaces; one that
// selects by labels has it list them, and while they are not read every
// setting is refused, since a rule they would match comes before any
// other (here: trust granted by name, refused by the tenant's label).
func TestWatcherFollowsLabelsOnlyForSelectors(t *testing.T) {
	kubeapi.Binaries(t)
	s := kubeapi.Start(t)
	s.CreateNamespace(t, "b-prod")
	label(t, s, "b-prod", map[string]string{"hwnet.io/tenant": "b"})
	vfpolicytest.InstallCRD(t, s)
	const byName = `{"name": "by-name", "namespaces": ["b-prod"], "allow": {"trust": true}}`
	vfpolicytest.Set(t, s, `{"rules": [`+byName+`]}`)

	w, gate := startThrough(t, s)
	checkEventually(t, w, "b-prod", trustOn, "")
	if n := gate.Held(); n != 0 {
		t.Fatalf("a policy naming its namespaces: %d requests for the namespaces; want none", n)
	}

	vfpolicytest.Set(t, s, `{"rules": [
		{"name": "tenant-b", "namespaceSelector": {"matchLabels": {"hwnet.io/tenant": "b"}}, "allow": {"vlans": [{"min": 100, "max": 199}]}},
		`+byName+`]}`)
	checkEventually(t, w, "b-prod", trustOn, "VFSettingsPolicy hwnet is unknown (the namespaces' labels are not read from the API server yet)")
	vfpolicytest.WaitFor(t, "the namespaces to be asked for", func() bool { return gate.Held() > 0 })

	gate.Open()
	checkEventually(t, w, "b-prod", trustOn, "VF setting trust=on refused by VFSettingsPolicy hwnet rule tenant-b for namespace b-prod")
	checkEventually(t, w, "b-prod", vlan(150), "")
}

// startThrough runs a watcher whose requests for the namespaces the
// returned gate holds until it opens.
func startThrough(t *testing.T, s *kubeapi.Server) (*vfpolicywatch.Watcher, *kubeapi.RequestGate) {
	t.Helper()
	cfg, gate := kubeapi.GateRequests(s.Config(), func(key string) bool { return strings.HasSuffix(key, " namespaces") })
	gate.Close()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	w := vfpolicywatch.New(client, dyn, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, gate
}
