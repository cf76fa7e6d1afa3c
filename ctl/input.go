package ctl

import (
	"fmt"
	"io"
	"os"
)

// maxInput bounds what a command reads from a file or standard input: the
// API server keeps a ConfigMap, where a pool config lives, to 1 MiB.
const maxInput = 1 << 20

// readInput reads file, or standard input for "-", refusing more than
// maxInput bytes: kubectl exec -i ... hwnetctl doctor --config - takes a
// config the pod has no file of.
func readInput(file string) ([]byte, error) {
	r := io.Reader(os.Stdin)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	if len(data) > maxInput {
		return nil, fmt.Errorf("%s is larger than %d bytes", file, maxInput)
	}
	return data, nil
}
