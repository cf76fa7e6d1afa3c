package main

import (
	"strings"
	"testing"
)

func TestNetConfValidation(t *testing.T) {
	tests := []struct {
		name, conf string
		wantErr    string // empty: valid for ADD
	}{
		{"plain by default", `{"cniVersion":"1.0.0","name":"n","type":"t"}`, ""},
		{"sriov", `{"name":"n","type":"t","personality":"sriov","deviceID":"0000:3b:02.0"}`, ""},
		{"sriov without deviceID", `{"name":"n","type":"t","personality":"sriov"}`, "VF pci addr is required"},
		{"ib-sriov without deviceID", `{"name":"n","type":"t","personality":"ib-sriov"}`, "VF pci addr is required"},
		{"short deviceID", `{"name":"n","type":"t","personality":"sriov","deviceID":"3b:02.0"}`, `"deviceID" is "3b:02.0"`},
		{"unknown personality", `{"name":"n","type":"t","personality":"macvlan"}`, `"personality" is "macvlan"`},
		{"unknown failOn", `{"name":"n","type":"t","failOn":["ADD","del"]}`, `"failOn" names "del"`},
		{"bad prevResult", `{"cniVersion":"1.0.0","name":"n","type":"t","prevResult":{"ips":[{"address":"x"}]}}`, `"prevResult"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, err := decodeNetConf([]byte(tt.conf))
			if err == nil {
				err = conf.validate()
			}
			if err == nil {
				err = conf.requireDevice()
			}
			if tt.wantErr == "" && err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want one containing %s", err, tt.wantErr)
			}
		})
	}
}

func TestHardwareAddr(t *testing.T) {
	tests := []struct {
		name, conf, want, wantErr string
	}{
		{"runtimeConfig mac", `{"personality":"sriov","deviceID":"0000:3b:02.0","runtimeConfig":{"mac":"02:AA:bb:cc:dd:ee"}}`,
			"02:aa:bb:cc:dd:ee", ""},
		{"IPoIB mac refused for sriov", `{"personality":"sriov","runtimeConfig":{"mac":"00:00:00:00:fe:80:00:00:00:00:00:00:00:11:22:33:44:55:66:77"}}`,
			"", `"mac" is`},
		{"guid", `{"personality":"ib-sriov","deviceID":"0000:41:00.2","runtimeConfig":{"infinibandGUID":"00:11:22:33:44:55:66:77"}}`,
			"fe:80:00:00:00:00:00:00:00:11:22:33:44:55:66:77", ""},
		{"6-byte guid", `{"personality":"ib-sriov","runtimeConfig":{"infinibandGUID":"00:11:22:33:44:55"}}`,
			"", `"infinibandGUID" is "00:11:22:33:44:55"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, err := decodeNetConf([]byte(tt.conf))
			if err != nil {
				t.Fatal(err)
			}
			addr, err := conf.hardwareAddr()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || !strings.HasSuffix(addr.String(), tt.want) {
				t.Errorf("hardwareAddr() = %s, %v; want one ending in %s", addr, err, tt.want)
			}
		})
	}
}

func FuzzNetConf(f *testing.F) {
	f.Add(`{"cniVersion":"1.1.0","name":"n","type":"t","personality":"ib-sriov","deviceID":"0000:41:00.2","runtimeConfig":{"infinibandGUID":"00:11:22:33:44:55:66:77"}}`)
	f.Add(`{"cniVersion":"0.4.0","name":"n","type":"t","personality":"sriov","prevResult":{"interfaces":[{"name":"eth0"}]}}`)
	f.Add(`{"failOn":["GC"],"runtimeConfig":{"mac":"zz"}}`)
	f.Fuzz(func(t *testing.T, stdin string) {
		conf, err := decodeNetConf([]byte(stdin))
		if err != nil || conf.validate() != nil || conf.requireDevice() != nil {
			return
		}
		addr, err := conf.hardwareAddr()
		if err == nil && conf.hasDevice() && len(addr) != 6 && len(addr) != 20 {
			t.Errorf("hardware address %s is neither Ethernet nor IPoIB", addr)
		}
	})
}
