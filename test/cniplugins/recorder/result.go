package main

import (
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	types020 "github.com/containernetworking/cni/pkg/types/020"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// buildResult composes the ADD result: the prevResult passed through (or an
// empty one), then the personality's sandbox interface, then the IPAM
// result's addresses, routes and DNS, the addresses pointing at that
// interface.
func buildResult(conf *netConf, ifName, netns string, ipam types.Result) (*types100.Result, error) {
	result := &types100.Result{CNIVersion: types100.ImplementedSpecVersion}
	if conf.PrevResult != nil {
		prev, err := types100.NewResultFromResult(conf.PrevResult)
		if err != nil {
			return nil, fmt.Errorf("netconf \"prevResult\": %w", err)
		}
		result = prev
	}
	var ifIndex *int
	if conf.hasDevice() {
		iface, err := sandboxInterface(conf, ifName, netns)
		if err != nil {
			return nil, err
		}
		result.Interfaces = append(result.Interfaces, iface)
		ifIndex = types100.Int(len(result.Interfaces) - 1)
	}
	if ipam == nil {
		return result, nil
	}
	return mergeIPAM(result, ipam, ifIndex)
}

func sandboxInterface(conf *netConf, ifName, netns string) (*types100.Interface, error) {
	addr, err := conf.hardwareAddr()
	if err != nil {
		return nil, err
	}
	return &types100.Interface{Name: ifName, Mac: addr.String(), Sandbox: netns}, nil
}

func mergeIPAM(result *types100.Result, ipam types.Result, ifIndex *int) (*types100.Result, error) {
	ipamResult, err := types100.NewResultFromResult(ipam)
	if err != nil {
		return nil, fmt.Errorf("IPAM result: %w", err)
	}
	for _, ip := range ipamResult.IPs {
		ip.Interface = ifIndex
		result.IPs = append(result.IPs, ip)
	}
	result.Routes = append(result.Routes, ipamResult.Routes...)
	if !ipamResult.DNS.IsEmpty() {
		result.DNS = ipamResult.DNS
	}
	return result, nil
}

// printResult prints result in the configuration's CNI version.
func printResult(result *types100.Result, cniVersion string) error {
	hasInterfaces, err := version.GreaterThanOrEqualTo(cniVersion, "0.3.0")
	if err != nil {
		return fmt.Errorf("netconf \"cniVersion\": %w", err)
	}
	if !hasInterfaces && len(result.IPs) == 0 {
		// A 0.1.0 or 0.2.0 result can only carry addresses and types100
		// refuses to convert one without; a plugin with no IPAM has
		// nothing else to report.
		return (&types020.Result{CNIVersion: cniVersion}).Print()
	}
	return types.PrintResult(result, cniVersion)
}
