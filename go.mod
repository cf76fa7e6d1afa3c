module github.com/hwnet-io/hwnet

go 1.26

require (
	github.com/k8snetworkplumbingwg/govdpa v0.1.4 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/sys v0.10.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
