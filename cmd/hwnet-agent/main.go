// Command hwnet-agent is hwnet's node agent: one kubelet device plugin per
// resource pool of the node's SR-IOV and other NICs.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hwnet-io/hwnet/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := agent.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
