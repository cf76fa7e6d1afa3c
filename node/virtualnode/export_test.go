package virtualnode

// The internals the external tests check directly.
const (
	ArphrdEther      = arphrdEther
	ArphrdInfiniBand = arphrdInfiniBand
	ClassEthernet    = classEthernet
	ClassInfiniBand  = classInfiniBand
)

type RoutingID = routingID

var (
	DeleteNetns    = deleteNetns
	IsMountPoint   = isMountPoint
	IsUIODriver    = isUIODriver
	NetnsDir       = netnsDir
	ParseRanges    = parseRanges
	ParseRoutingID = parseRoutingID
	Plan           = plan
)

func (r routingID) Addr() string { return r.addr() }
