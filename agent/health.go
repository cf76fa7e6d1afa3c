package agent

import (
	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/ledger"
)

// healthView is the agent's current view for health: the ledger says which
// devices something holds, whose netdev may be in a pod.
func (a *Agent) healthView() devhealth.View {
	return devhealth.View{Inv: a.inv, Links: a.links, Netdevs: a.netdevs, Held: a.holders.Held()}
}

// frontEnd is how a pool hands out its devices, for the ledger to tell its
// own holds from others'.
func frontEnd(name string, dra bool) ledger.FrontEnd {
	return ledger.FrontEnd{Resource: name, DRA: dra}
}
