package main

import (
	"strings"
	"testing"
)

const sample = `#
#	List of PCI ID's
#
#	Version: 2023.04.10
#
#	This file can be distributed under either the GNU General Public License
#	(version 2 or higher) or the 3-clause BSD License.
#

# Vendors, devices and subsystems. Please keep sorted.

0010  Allied Telesis, Inc (Wrong ID)
# This is a relabelled RTL-8139
	8139  AT-2500TX V3 Ethernet
8086  Intel Corporation
	1592  Ethernet Controller E810-C for QSFP
		8086 0002  Ethernet Network Adapter E810-C-Q2
	1889  Ethernet Adaptive Virtual Function

# List of known device classes, subclasses and programming interfaces

C 02  Network controller
	00  Ethernet controller
	07  Infiniband controller
C 0c  Serial bus controller
	03  USB controller
		30  XHCI
`

func TestFilter(t *testing.T) {
	got, err := filter(sample)
	if err != nil {
		t.Fatal(err)
	}
	want := `#
#	List of PCI ID's
#
#	Version: 2023.04.10
#
#	This file can be distributed under either the GNU General Public License
#	(version 2 or higher) or the 3-clause BSD License.
#
` + filterNote + `0010  Allied Telesis, Inc (Wrong ID)
	8139  AT-2500TX V3 Ethernet
8086  Intel Corporation
	1592  Ethernet Controller E810-C for QSFP
	1889  Ethernet Adaptive Virtual Function
`
	if got != want {
		t.Errorf("filter(sample) =\n%s\nwant\n%s", got, want)
	}
}

func TestFilterRejects(t *testing.T) {
	tests := []struct{ in, wantErr string }{
		{"8086 Intel\n", `line 1: "8086 Intel" is not a vendor line`},
		{"8086  Intel\n\t15920  Bad\n", `line 2: "\t15920  Bad" is not a device line`},
		{"8086  Intel\n\t159G  Bad\n", "line 2:"},
		{"8086  \n", "line 1:"},
		{"ABCD  Upper case\n", "line 1:"},
	}
	for _, tt := range tests {
		_, err := filter(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("filter(%q) error = %v; want one containing %q", tt.in, err, tt.wantErr)
		}
	}
}
