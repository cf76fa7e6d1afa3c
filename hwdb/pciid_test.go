package hwdb

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParsePCIID(t *testing.T) {
	tests := []struct {
		in   string
		want PCIID
	}{
		{"8086", 0x8086},
		{"0x8086", 0x8086},
		{"0X8086", 0x8086},
		{"0x8086\n", 0x8086}, // sysfs's vendor file
		{" 15b3\t", 0x15b3},
		{"15B3", 0x15b3},
		{"0xABcd", 0xabcd},
		{"0000", 0},
		{"ffff", 0xffff},
	}
	for _, tt := range tests {
		got, err := ParsePCIID(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParsePCIID(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestParsePCIIDRejects(t *testing.T) {
	for _, in := range []string{
		"", "808", "80866", "0x", "0x808", "0x80866", "zz12", "0x80g6", "8086h",
		"x8086", "0x0x86", "+123", "-123", "80 86", "0b1010", "８０８６",
	} {
		id, err := ParsePCIID(in)
		if err == nil {
			t.Errorf("ParsePCIID(%q) = %v, nil; want an error", in, id)
			continue
		}
		if !errors.Is(err, ErrInvalidPCIID) {
			t.Errorf("ParsePCIID(%q) error %v does not wrap ErrInvalidPCIID", in, err)
		}
		if want := `is not a 4-digit hex PCI ID`; !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePCIID(%q) error %q does not say %q", in, err, want)
		}
	}
}

func TestParsePCIIDDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ParsePCIID("0x8086\n"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("ParsePCIID allocates %v times per call; want 0", allocs)
	}
}

func TestPCIIDString(t *testing.T) {
	tests := map[PCIID]string{0: "0000", 0x8086: "8086", 0x15b3: "15b3", 0xabcd: "abcd", 0x101e: "101e"}
	for id, want := range tests {
		if got := id.String(); got != want {
			t.Errorf("PCIID(%#x).String() = %q; want %q", uint16(id), got, want)
		}
	}
}

func TestPCIIDJSON(t *testing.T) {
	got, err := json.Marshal(struct{ V PCIID }{0x15b3})
	if err != nil || string(got) != `{"V":"15b3"}` {
		t.Errorf(`json.Marshal(PCIID 0x15b3) = %s, %v; want {"V":"15b3"}, nil`, got, err)
	}
	for in, want := range map[string]PCIID{`"8086"`: 0x8086, `"0x8086"`: 0x8086, `"0X15B3"`: 0x15b3} {
		var id PCIID
		if err := json.Unmarshal([]byte(in), &id); err != nil || id != want {
			t.Errorf("json.Unmarshal(%s) = %v, %v; want %v, nil", in, id, err, want)
		}
	}
}

func TestPCIIDJSONRejects(t *testing.T) {
	tests := []struct{ in, wantErr string }{
		{`"zz12"`, `"zz12" is not a 4-digit hex PCI ID`},
		{`" 8086"`, `" 8086" is not a 4-digit hex PCI ID`},
		{`"808"`, `"808" is not a 4-digit hex PCI ID`},
		{`8086`, `8086 is not a 4-digit hex PCI ID in quotes`},
		{`32902`, `32902 is not a 4-digit hex PCI ID in quotes`},
		{`true`, `true is not a 4-digit hex PCI ID in quotes`},
		{`["8086"]`, `is not a 4-digit hex PCI ID in quotes`},
	}
	for _, tt := range tests {
		var id PCIID
		err := json.Unmarshal([]byte(tt.in), &id)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidPCIID) {
			t.Errorf("json.Unmarshal(%s) error = %v; want one containing %q", tt.in, err, tt.wantErr)
		}
	}
}

func TestPCIIDJSONNullLeavesValue(t *testing.T) {
	id := PCIID(0x8086)
	if err := json.Unmarshal([]byte("null"), &id); err != nil || id != 0x8086 {
		t.Errorf("json.Unmarshal(null) = %v, %v; want 8086 unchanged, nil", id, err)
	}
}

func FuzzParsePCIID(f *testing.F) {
	for _, s := range []string{"8086", "0x8086\n", "0X15B3", " abcd ", "zz12", "", "0x", "80866"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParsePCIID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidPCIID) {
				t.Fatalf("ParsePCIID(%q) error %v does not wrap ErrInvalidPCIID", s, err)
			}
			return
		}
		text := id.String()
		digits := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
		if text != strings.ToLower(digits) {
			t.Fatalf("ParsePCIID(%q) = %s; want the input's digits", s, text)
		}
		again, err := ParsePCIID(text)
		if err != nil || again != id {
			t.Fatalf("ParsePCIID(%q) = %v, %v; want %v, nil", text, again, err, id)
		}
		js, _ := id.MarshalJSON()
		var back PCIID
		if err := back.UnmarshalJSON(js); err != nil || back != id {
			t.Fatalf("JSON round trip of %v gave %v, %v", id, back, err)
		}
	})
}
