// Package layout holds the module to the layering ARCHITECTURE.md draws:
// the top-level rooms, the one direction imports flow between them, and
// the agent as a composition root.
package layout

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hwnet-io/hwnet/"

// rank orders the rooms as ARCHITECTURE.md does: a package may import only
// rooms of a higher rank than its own, its tests included. test/ may use
// any room and is used by tests only.
var rank = map[string]int{
	"cmd":   0,
	"agent": 1, "ctl": 1,
	"deploy":       2,
	"deviceplugin": 3, "dra": 3, "controller": 3,
	"cni":      4,
	"node":     5,
	"hwdb":     6,
	"api":      7,
	"internal": 8,
}

const (
	maxRooms        = 12 // top-level folders with Go code, test/ aside
	maxAgentImports = 15 // the composition root wires; it does not do
)

type pkg struct {
	ImportPath, Dir           string
	Imports, Deps             []string
	TestImports, XTestImports []string
}

// goList runs go list -json with args and decodes its stream of packages.
func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
}

// room is the top-level folder of a module package, "" for another module's.
func room(path string) string {
	rest, ok := strings.CutPrefix(path, module)
	if !ok {
		return ""
	}
	first, _, _ := strings.Cut(rest, "/")
	return first
}

func TestRoomsAreFewAndKnown(t *testing.T) {
	rooms := map[string]bool{}
	for _, p := range goList(t, "github.com/hwnet-io/hwnet/...") {
		if r := room(p.ImportPath); r != "test" {
			rooms[r] = true
			if _, ok := rank[r]; !ok {
				t.Errorf("%s is in room %s/, which ARCHITECTURE.md does not place", p.ImportPath, r)
			}
		}
	}
	if len(rooms) > maxRooms {
		t.Errorf("%d top-level folders hold Go code besides test/, want at most %d", len(rooms), maxRooms)
	}
}

func TestImportsFlowOneWay(t *testing.T) {
	for _, p := range goList(t, "github.com/hwnet-io/hwnet/...") {
		from := room(p.ImportPath)
		if from == "test" {
			continue
		}
		for _, list := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			for _, imp := range list {
				checkImport(t, p.ImportPath, from, imp, slices.Contains(p.Imports, imp))
			}
		}
	}
}

// checkImport fails an import of room to against the order of the rooms;
// shipped says a non-test file imports it.
func checkImport(t *testing.T, path, from, imp string, shipped bool) {
	t.Helper()
	to := room(imp)
	switch {
	case to == "" || to == from:
	case to == "test" && shipped:
		t.Errorf("%s (shipped code) imports %s", path, imp)
	case to == "test":
	case rank[to] <= rank[from]:
		t.Errorf("%s imports %s: %s/ may import only rooms below it (ARCHITECTURE.md)", path, imp, from)
	}
}

func TestBinariesShipNoTestCode(t *testing.T) {
	for _, p := range goList(t, "-deps", "github.com/hwnet-io/hwnet/cmd/...") {
		if room(p.ImportPath) == "test" {
			t.Errorf("a binary under cmd/ links %s", p.ImportPath)
		}
	}
}

func TestAgentOnlyWires(t *testing.T) {
	agent := goList(t, "github.com/hwnet-io/hwnet/agent")[0]
	var own []string
	for _, imp := range agent.Imports {
		if room(imp) != "" {
			own = append(own, strings.TrimPrefix(imp, module))
		}
	}
	if len(own) > maxAgentImports {
		t.Errorf("agent/ imports %d of the module's packages, want at most %d: %v", len(own), maxAgentImports, own)
	}
}
