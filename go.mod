module github.com/hwnet-io/hwnet

go 1.26

require (
	github.com/jaypipes/ghw v0.26.0
	github.com/k8snetworkplumbingwg/govdpa v0.1.4
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sys v0.25.0
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/go-ole/go-ole v1.2.6 // indirect
	github.com/jaypipes/pcidb v1.1.1 // indirect
	github.com/yusufpapurcu/wmi v1.2.4 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	howett.net/plist v1.0.2-0.20250314012144-ee69052608d9 // indirect
)
