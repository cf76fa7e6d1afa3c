package deploy_test

import "testing"

// TestAgentReadsVFSettingsPolicy (issue 42): the agent may list and watch
// the VFSettingsPolicy and the namespaces its rules select by, which it
// caches to judge VF settings at prepare and ADD, and write neither.
func TestAgentReadsVFSettingsPolicy(t *testing.T) {
	helm := tool(t, "HWNET_HELM", "helm", defaultHelm)
	for _, set := range [][]string{nil, {"dra.enabled=false"}} {
		rules := agentRules(t, helmTemplate(t, helm, set...))
		for _, r := range []struct{ group, resource string }{{"hwnet.io", "vfsettingspolicies"}, {"", "namespaces"}} {
			for _, verb := range []string{"list", "watch"} {
				if !grants(rules, r.group, r.resource, verb) {
					t.Errorf("%v: the agent may not %s %s", set, verb, r.resource)
				}
			}
			for _, verb := range []string{"create", "update", "patch", "delete"} {
				if grants(rules, r.group, r.resource, verb) {
					t.Errorf("%v: the agent may %s %s", set, verb, r.resource)
				}
			}
		}
	}
}
