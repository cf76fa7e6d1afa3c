package virtualnode_test

import (
	"os"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// build builds the spec and destroys the node when the test ends.
func build(t testing.TB, spec *virtualnode.Spec, links bool) *virtualnode.Node {
	t.Helper()
	return vnodetest.BuildForTest(t, spec, vnodetest.OpenDB(t), links)
}

func mustParse(t testing.TB, yaml string) *virtualnode.Spec {
	t.Helper()
	s, err := virtualnode.ParseSpec([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAttr reads a tree attribute without its trailing newline.
func readAttr(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	return string(b)
}
