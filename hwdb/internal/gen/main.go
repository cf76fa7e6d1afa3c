// Command gen writes hwdb's embedded copy of pci.ids.
//
// It keeps the file's leading comment block (source, version, maintainers,
// licence) and every vendor and device line, and drops subsystem lines, the
// device class section and all other comments: hwdb names vendors and
// devices, nothing else, and the smaller file keeps hwdb.Open fast.
//
// The output depends only on the input.
//
// Usage, from the hwdb directory (see the go:generate line in names.go):
//
//	go run ./internal/gen -in /usr/share/misc/pci.ids -out data/pci.ids
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	in := flag.String("in", "/usr/share/misc/pci.ids", "pci.ids file to read")
	out := flag.String("out", "data/pci.ids", "file to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(inPath, outPath string) error {
	src, err := os.ReadFile(inPath)
	if err != nil {
		return err
	}
	text, err := filter(string(src))
	if err != nil {
		return fmt.Errorf("%s: %w", inPath, err)
	}
	return os.WriteFile(outPath, []byte(text), 0o644)
}

// filterNote follows the copied header, so a reader of the embedded file
// knows it is not the whole pci.ids.
const filterNote = "#\tFiltered by hwnet's hwdb/internal/gen: only vendor and device lines\n" +
	"#\tare kept; subsystems, device classes and other comments were dropped.\n" +
	"#\n"

// filter returns the header comment block of a pci.ids file followed by its
// vendor and device lines.
func filter(src string) (string, error) {
	var out strings.Builder
	out.Grow(len(src) / 2)
	header := true
	inClass := false
	lineNo := 0
	for line := range strings.Lines(src) {
		lineNo++
		line = strings.TrimSuffix(line, "\n")
		if header && strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		if header {
			header = false
			out.WriteString(filterNote)
		}
		keep, err := classify(line, &inClass)
		if err != nil {
			return "", fmt.Errorf("line %d: %w", lineNo, err)
		}
		if keep {
			out.WriteString(line + "\n")
		}
	}
	return out.String(), nil
}

// classify reports whether line is a vendor or device line to keep. inClass
// tracks the "C xx" class section, whose tab-indented subclass lines look
// like device lines but name classes.
func classify(line string, inClass *bool) (bool, error) {
	switch {
	case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "\t\t"):
		return false, nil
	case strings.HasPrefix(line, "C "):
		*inClass = true
		return false, nil
	case strings.HasPrefix(line, "\t"):
		if *inClass {
			return false, nil
		}
		if !isEntry(line[1:]) {
			return false, fmt.Errorf("%q is not a device line", line)
		}
		return true, nil
	default:
		if !isEntry(line) {
			return false, fmt.Errorf("%q is not a vendor line", line)
		}
		*inClass = false
		return true, nil
	}
}

// isEntry reports whether s is "hhhh  name": four lower-case hex digits, two
// spaces and a name, the shape of vendor and device lines.
func isEntry(s string) bool {
	if len(s) < 7 || s[4:6] != "  " || s[6] == ' ' {
		return false
	}
	for i := range 4 {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
