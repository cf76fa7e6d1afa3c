package kubeclient_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/hwnet-io/hwnet/internal/kubeclient"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// watchRecorder records each watch request's query and keeps its
// response body, so that a test can end the watch as the API server does
// at the watch's timeout.
type watchRecorder struct {
	next    http.RoundTripper
	mu      sync.Mutex
	queries []string
	bodies  []*endableBody
	changed chan struct{}
}

// endableBody is a watch's response body that end makes read as ended
// (EOF), as a watch the API server closes at its timeout does; a read
// under way when it ends, waiting for the next event, returns EOF too.
type endableBody struct {
	io.ReadCloser
	ended atomic.Bool
}

func (b *endableBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.ended.Load() {
		return 0, io.EOF
	}
	return n, err
}

func (b *endableBody) end() {
	b.ended.Store(true)
	b.ReadCloser.Close()
}

func (w *watchRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if req.URL.Query().Get("watch") != "true" || err != nil {
		return resp, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	body := &endableBody{ReadCloser: resp.Body}
	resp.Body = body
	w.queries = append(w.queries, req.URL.RawQuery)
	w.bodies = append(w.bodies, body)
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return resp, nil
}

// await waits until n watches were made and returns the nth's query.
func (w *watchRecorder) await(ctx context.Context, t *testing.T, n int) string {
	t.Helper()
	for {
		w.mu.Lock()
		if len(w.queries) >= n {
			q := w.queries[n-1]
			w.mu.Unlock()
			return q
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			t.Fatalf("watch %d never made: %v", n, ctx.Err())
		case <-w.changed:
		}
	}
}

// end ends the ith watch as its timeout would.
func (w *watchRecorder) end(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bodies[i].end()
}

// TestQuietKind: an informer with the tweak streams its first list as
// client-go does (sendInitialEvents, which needs bookmarks, within
// client-go's 5-10 min); the watch it starts again once that one ends at
// its timeout asks for no bookmarks and lasts 30-60 min; and it still
// follows the kind's changes.
func TestQuietKind(t *testing.T) {
	s := kubeapi.Start(t)
	cfg := s.Config()
	rec := &watchRecorder{changed: make(chan struct{}, 1)}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	inf := coreinformers.NewFilteredNamespaceInformer(client, 0, cache.Indexers{}, kubeclient.QuietKind)
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("namespaces never synced")
	}
	first := rec.await(ctx, t, 1)
	if !containsAll(first, "sendInitialEvents=true", "allowWatchBookmarks=true") {
		t.Errorf("the first watch %q does not stream the list with the bookmark that ends it", first)
	}
	// The streamed list asks for bookmarks: it keeps client-go's timeout.
	if secs := timeoutOf(t, first); secs < 300 || secs > 600 {
		t.Errorf("the first watch %q lasts %d s, want client-go's 300-600", first, secs)
	}
	// A watch that ends at once with no event is an error to the
	// reflector, which lists again; one that carried an event is not.
	createAndSee(ctx, t, client, inf, "before-the-timeout")
	rec.end(0)
	again := rec.await(ctx, t, 2)
	if containsAll(again, "allowWatchBookmarks=true") || containsAll(again, "sendInitialEvents") {
		t.Errorf("the watch started again lists again or asks for bookmarks: %q", again)
	}
	checkLongWatch(t, again)
	createAndSee(ctx, t, client, inf, "after-the-timeout")
}

// checkLongWatch fails t unless the watch request's query asks for a
// timeout of 30-60 min.
func checkLongWatch(t *testing.T, query string) {
	t.Helper()
	if secs := timeoutOf(t, query); secs < 1800 || secs > 3600 {
		t.Errorf("watch %q lasts %d s, want 1800-3600 (the API server's own default)", query, secs)
	}
}

// timeoutOf is the timeoutSeconds a watch request's query asks for.
func timeoutOf(t *testing.T, query string) int {
	t.Helper()
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := strconv.Atoi(q.Get("timeoutSeconds"))
	if err != nil {
		t.Fatalf("watch %q: timeoutSeconds: %v", query, err)
	}
	return secs
}

// createAndSee creates namespace name and waits until inf has it.
func createAndSee(ctx context.Context, t *testing.T, client kubernetes.Interface, inf cache.SharedIndexInformer, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	for {
		if _, ok, _ := inf.GetStore().GetByKey(name); ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the informer never saw namespace %s: %v", name, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestLongWatch: a watch's timeout goes from client-go's 5-10 min to
// 30-60; a list, which names none, keeps none; the watch that streams
// the list, with its bookmarks, keeps client-go's.
func TestLongWatch(t *testing.T) {
	for _, tt := range []struct {
		name      string
		timeout   *int64
		streams   bool
		wantAfter *int64
	}{
		{"list", nil, false, nil},
		{"shortest watch", ptr.To[int64](300), false, ptr.To[int64](1800)},
		{"longest watch", ptr.To[int64](599), false, ptr.To[int64](3594)},
		{"the watch that streams the list", ptr.To[int64](300), true, ptr.To[int64](300)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := metav1.ListOptions{TimeoutSeconds: tt.timeout}
			if tt.streams {
				o.SendInitialEvents = &tt.streams
			}
			before := deref(tt.timeout)
			kubeclient.LongWatch(&o)
			if deref(o.TimeoutSeconds) != deref(tt.wantAfter) {
				t.Errorf("timeout %v -> %v, want %v", before, deref(o.TimeoutSeconds), deref(tt.wantAfter))
			}
			// The reflector's own variable is not the tweak's to change.
			if deref(tt.timeout) != before {
				t.Errorf("the reflector's timeout changed from %v to %v", before, deref(tt.timeout))
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
