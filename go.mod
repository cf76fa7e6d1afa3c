module github.com/hwnet-io/hwnet

go 1.26.0

require (
	github.com/fsnotify/fsnotify v1.9.0
	github.com/jaypipes/ghw v0.26.0
	github.com/k8snetworkplumbingwg/govdpa v0.1.4
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sys v0.48.0
	google.golang.org/grpc v1.85.0
	k8s.io/kubelet v0.37.2
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/go-ole/go-ole v1.2.6 // indirect
	github.com/jaypipes/pcidb v1.1.1 // indirect
	github.com/yusufpapurcu/wmi v1.2.4 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	howett.net/plist v1.0.2-0.20250314012144-ee69052608d9 // indirect
)
