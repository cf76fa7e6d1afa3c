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
// Importing an image again replaces it. The control plane's Cluster
// imports into every node's containerd.
func (c *Cluster) ImportImage(ctx context.Context, tarball string) error {
	return c.importEverywhere(ctx, []string{tarball})
}

// importEverywhere imports the tarballs into each node's containerd, the
// nodes at once.
func (c *Cluster) importEverywhere(ctx context.Context, tarballs []string) error {
	return atOnce(c.Nodes(), func(n *Cluster) error { return n.importImages(ctx, tarballs) })
}

// importInto imports one tarball into this node's containerd.
func (c *Cluster) importInto(ctx context.Context, tarball string) error {
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
		if err := c.importInto(ctx, tarball); err != nil {
			return err
		}
		names[i] = filepath.Base(tarball)
	}
	if len(tarballs) > 0 {
		c.say("%s: imported %s (%.1fs)", c.st.Name, strings.Join(names, ", "), time.Since(start).Seconds())
	}
	return nil
}
