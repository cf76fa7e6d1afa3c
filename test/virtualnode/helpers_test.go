package virtualnode

import (
	"os"
	"testing"
)

// build builds the spec and destroys the node when the test ends.
func build(t testing.TB, spec *Spec, links bool) *Node {
	t.Helper()
	return BuildForTest(t, spec, OpenDB(t), links)
}

func mustParse(t testing.TB, yaml string) *Spec {
	t.Helper()
	s, err := ParseSpec([]byte(yaml))
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
