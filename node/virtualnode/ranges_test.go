package virtualnode_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
)

func TestParseRanges(t *testing.T) {
	tests := []struct {
		in      string
		n       int
		want    []int
		wantErr string
	}{
		{in: "", n: 4, want: nil},
		{in: "  ", n: 0, want: nil},
		{in: "3", n: 4, want: []int{3}},
		{in: "0,2-3", n: 4, want: []int{0, 2, 3}},
		{in: "6-7", n: 8, want: []int{6, 7}},
		{in: " 5 , 1-2 ,1", n: 8, want: []int{1, 2, 5}},
		{in: "2-2", n: 3, want: []int{2}},
		{in: "0-65534", n: 65535, want: nil}, // checked by length below
		{in: "9-3", n: 10, wantErr: `range "9-3" is reversed`},
		{in: "4", n: 4, wantErr: `index 4 is out of range: vfs is 4`},
		{in: "1,,2", n: 4, wantErr: `empty element in "1,,2"`},
		{in: "1,", n: 4, wantErr: `empty element in "1,"`},
		{in: "-1", n: 4, wantErr: `"" is not an index`},
		{in: "1-", n: 4, wantErr: `"" is not an index`},
		{in: "1-2-3", n: 4, wantErr: `"2-3" is not an index`},
		{in: "+1", n: 4, wantErr: `"+1" is not an index`},
		{in: "0x1", n: 4, wantErr: `"0x1" is not an index`},
		{in: "123456", n: 4, wantErr: `"123456" is not an index`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := virtualnode.ParseRanges(tt.in, tt.n)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("parseRanges(%q, %d) error %v, want %q", tt.in, tt.n, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil && len(got) == 65535 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseRanges(%q, %d) = %v, want %v", tt.in, tt.n, got, tt.want)
			}
		})
	}
}

func FuzzParseRanges(f *testing.F) {
	for _, s := range []string{"", "0", "0,2-3", "9-3", "1,,2", " 7 ", "0-99999", "65534"} {
		f.Add(s, uint16(8))
	}
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		got, err := virtualnode.ParseRanges(s, int(n))
		if err != nil {
			return
		}
		for i, v := range got {
			if v < 0 || v >= int(n) || i > 0 && got[i-1] >= v {
				t.Fatalf("parseRanges(%q, %d) = %v: not sorted, unique and below n", s, n, got)
			}
		}
		// The set written back as a plain list parses to itself.
		var b strings.Builder
		for i, v := range got {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(v))
		}
		again, err := virtualnode.ParseRanges(b.String(), int(n))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("parseRanges(%q) = %v, %v; want %v", b.String(), again, err, got)
		}
	})
}
