package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
)

// answerTimeout bounds Answers' request; kubelet's own probe timeout,
// which the agent's readiness probe answers within, is a second by default.
const answerTimeout = 800 * time.Millisecond

// installShim copies the shim binary into the runtime's plugin directory
// through a temporary file and a rename, so a runtime executing the plugin
// at that moment runs the old binary or the new one, never half of one.
func installShim(src, binDir string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("CNI shim: %w", err)
	}
	if _, err := atomicfile.Replace(filepath.Join(binDir, pluginconf.Type), data, 0o755); err != nil {
		return fmt.Errorf("CNI shim: %w", err)
	}
	return nil
}

// answerFresh is how recent an answer on the CNI socket shows it serves
// without asking it: two of kubelet's runtime status asks, each a STATUS
// through the socket with containerd 2.x.
const answerFresh = 10 * time.Second

// socketCheck is the agent's readiness check of the CNI socket: a request
// answered there within answerFresh, else Answers. The readiness probe
// comes every 5 s, and each Answers is a connection on both ends.
func socketCheck(srv *server.Server, socket string) func(context.Context) error {
	return func(ctx context.Context) error {
		if srv.AnsweredWithin(answerFresh) {
			return nil
		}
		return Answers(ctx, socket)
	}
}

// Answers sends the CNI socket a request it refuses: any HTTP answer
// shows a server reads requests there, which a socket file alone does not.
// The agent's readiness probe asks it, and uninstalling refuses while an
// agent answers.
func Answers(ctx context.Context, socket string) error {
	ctx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://hwnet-agent"+wire.Path, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("CNI socket %s: %w", socket, err)
	}
	resp.Body.Close()
	return nil
}
