// Command hwnetctl is hwnet's operator command line.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hwnet-io/hwnet/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
