package kubeclient

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// WithoutBookmarks tweaks an informer's requests for a kind that seldom
// changes (NetworkAttachmentDefinitions, PodNetworks, the
// VFSettingsPolicy, namespaces) so that its watches ask the API server
// for no bookmarks. The API server sends a watch that asks one a minute:
// with nothing else to do, an idle agent woke for little but those, and
// on a 2 vCPU virtual machine each wake costs a millisecond or two of CPU.
// A bookmark keeps the watch's resource version current, so that the
// watch started again after its timeout (5-10 min) finds that version in
// the API server's watch cache; a kind with few changes keeps its last
// change's version there, and one gone from it costs a list of the kind
// again (the reflector's answer to "too old"). Pods, which change all the
// time, keep them. A watch that streams the first list
// (sendInitialEvents, client-go's WatchListClient) needs them to end it.
func WithoutBookmarks(o *metav1.ListOptions) {
	if o.SendInitialEvents == nil {
		o.AllowWatchBookmarks = false
	}
}
