// Command hwnet-controller is hwnet's KEP-3698 PodNetwork controller, run
// as a Deployment with leader election.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hwnet-io/hwnet/controller/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := daemon.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
