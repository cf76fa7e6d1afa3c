package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ImportImage imports a docker-archive tarball into containerd's k8s.io
// namespace, where kubelet finds its images; pods must use
// imagePullPolicy Never or IfNotPresent, as no registry is reachable.
// Importing an image again replaces it.
func (c *Cluster) ImportImage(ctx context.Context, tarball string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return fmt.Errorf("import image: %w", err)
	}
	defer f.Close()
	// Read from stdin: the tarball's path may be hidden inside the
	// namespace (under /run or /var/lib).
	cmd := c.Command(ctx, "ctr", "--address", containerdSocket, "--namespace", "k8s.io", "images", "import", "-")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("import image %s: %w: %s", tarball, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (c *Cluster) importImages(ctx context.Context, tarballs []string) error {
	start := time.Now()
	names := make([]string, len(tarballs))
	for i, tarball := range tarballs {
		if err := c.ImportImage(ctx, tarball); err != nil {
			return err
		}
		names[i] = filepath.Base(tarball)
	}
	if len(tarballs) > 0 {
		c.say("imported %s (%.1fs)", strings.Join(names, ", "), time.Since(start).Seconds())
	}
	return nil
}
