package kubeclient

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// QuietKind tweaks an informer's requests for a kind that seldom changes
// (NetworkAttachmentDefinitions, PodNetworks, the VFSettingsPolicy,
// namespaces, and the pods of one node): its watches ask for no bookmarks
// and last as long as the API server's own default (LongWatch).
func QuietKind(o *metav1.ListOptions) {
	withoutBookmarks(o)
	LongWatch(o)
}

// withoutBookmarks has a watch ask the API server for no bookmarks. The
// API server sends a watch that asks one a minute: with nothing else to
// do, an idle agent woke for little but those, and on a 2 vCPU virtual
// machine each wake costs a millisecond or two of CPU. A bookmark keeps
// the watch's resource version current, so that the watch started again
// after its timeout finds that version in the API server's watch cache; a
// kind with few changes keeps its last change's version there, and one
// gone from it costs a list of the kind again (the reflector's answer to
// "too old"). A watch that streams the first list (sendInitialEvents,
// client-go's WatchListClient) needs them to end it.
func withoutBookmarks(o *metav1.ListOptions) {
	if o.SendInitialEvents == nil {
		o.AllowWatchBookmarks = false
	}
}

// watchTimeoutScale takes client-go's watch timeout, 5-10 min with its
// jitter, to 30-60 min: what the API server gives a watch that names none
// (twice --min-request-timeout at most, 1800 s by default).
const watchTimeoutScale = 6

// LongWatch has an informer's watches last 30-60 min rather than
// client-go's 5-10. The API server ends a watch at its timeout and the
// reflector starts another: on an idle agent, whose five informers did
// that every 1.5 min between them, each new watch cost 12-15 ms of CPU.
// A dead connection is still found at once (HTTP/2 health pings every
// 30 s without a frame); what a shorter watch buys is an earlier move to
// another API server behind a load balancer, which the API server's own
// default does not ask for either. The first watch, which streams the
// list, keeps client-go's timeout: it asks for bookmarks (one a minute),
// and a quiet kind's next watch does not.
func LongWatch(o *metav1.ListOptions) {
	if o.TimeoutSeconds != nil && o.SendInitialEvents == nil {
		longer := *o.TimeoutSeconds * watchTimeoutScale
		o.TimeoutSeconds = &longer
	}
}
