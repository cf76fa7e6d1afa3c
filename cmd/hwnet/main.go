// Command hwnet is the CNI plugin the container runtime executes; it
// forwards each request to hwnet-agent (see package cni/shim).
package main

import (
	"os"

	"github.com/hwnet-io/hwnet/cni/shim"
)

func main() {
	os.Exit(shim.Main())
}
