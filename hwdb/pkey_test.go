package hwdb

import (
	"strconv"
	"strings"
	"testing"
)

func TestParsePKey(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "0x7fff", want: "0x7fff"},
		{in: "8001", want: "0x8001"},
		{in: "0XFFFF", want: "0xffff"},
		{in: "0x1\n", want: "0x0001"},
		{in: "", err: `"" is not a 16-bit hex partition key such as 0x7fff`},
		{in: "0x", err: `"0x" is not a 16-bit hex partition key`},
		{in: "0x10000", err: `"0x10000" is not a 16-bit hex partition key`},
		{in: "+7fff", err: `"+7fff" is not`},
		{in: "0x7fzz", err: `"0x7fzz" is not`},
	}
	for _, tt := range tests {
		got, err := ParsePKey(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParsePKey(%q) = %q, %v; want an error containing %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePKey(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParsePKey: what ParsePKey accepts it writes as the kernel does, and
// reads back the same.
func FuzzParsePKey(f *testing.F) {
	for _, s := range []string{"0x7fff", "8001", "0XFFFF", "0x1\n", "", "0x", "0x10000", "+1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParsePKey(s)
		if err != nil {
			return
		}
		if len(k) != 6 || !strings.HasPrefix(k, "0x") || strings.ToLower(k) != k {
			t.Fatalf("ParsePKey(%q) = %q; want 0x and four lower-case hex digits", s, k)
		}
		if _, err := strconv.ParseUint(k[2:], 16, 16); err != nil {
			t.Fatalf("ParsePKey(%q) = %q: not hex: %v", s, k, err)
		}
		if again, err := ParsePKey(k); err != nil || again != k {
			t.Fatalf("ParsePKey(%q) = %q, %v; want %q", k, again, err, k)
		}
	})
}
