package e2e

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hwnet-io/hwnet/test/e2e/image"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// dockerfileAgentRef is the agent's image as `buildah bud` builds it from
// the Dockerfile.
const dockerfileAgentRef = "localhost/hwnet-dockerfile:e2e"

// TestDockerfileImageRunsAgent: the image buildah bud builds from the
// Dockerfile (on local stand-ins for its base images, as test/e2e/image's
// TestDockerfileBuildah), imported into the node's containerd, runs the
// agent: the DaemonSet rolled to it is ready with every pool registered, a
// pod gets its SR-IOV attachment through it, and deleting the pod leaves
// nothing behind.
func TestDockerfileImageRunsAgent(t *testing.T) {
	e := setup(t)
	b, err := image.FindBuildah()
	if err != nil {
		vnodetest.Unavailable(t, err.Error())
	}
	// The build compiles hwnet inside buildah: beside other builds on two
	// cores it has taken over the 5 minutes other tests get.
	ctx, cancel := context.WithTimeout(t.Context(), 3*testTimeout)
	t.Cleanup(cancel)
	e.restoreHwnet(t)
	before := e.mustSnapshot(ctx, t)
	if _, err := b.BuildDockerfile(ctx, e.repo, dockerfileAgentRef); err != nil {
		t.Fatal(err)
	}
	// Buildah's storage keeps the stand-ins between runs, not each run's image.
	t.Cleanup(func() { b.Run(context.Background(), "rmi", dockerfileAgentRef) })
	tarball := filepath.Join(t.TempDir(), "hwnet-dockerfile.tar")
	if err := b.SaveDockerArchive(ctx, dockerfileAgentRef, tarball); err != nil {
		t.Fatal(err)
	}
	if err := e.c.ImportImage(ctx, tarball); err != nil {
		t.Fatal(err)
	}
	if _, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "set", "image", "daemonset/hwnet-agent", "hwnet-agent="+dockerfileAgentRef); err != nil {
		t.Fatal(err)
	}
	e.waitAgentRolled(ctx, t, dockerfileAgentRef)

	pod := workloadPod("dockerfile-image", `[{"name": "sriov-net", "ips": ["10.56.4.1/24"]}]`, map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name)
	if _, err := e.runPod(ctx, pod, 1); err != nil {
		t.Fatal(err)
	}
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
}
