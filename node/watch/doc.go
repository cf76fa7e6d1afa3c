// Package watch turns hardware, configuration and kubelet changes into
// events for the node agent, so that it reacts without a restart.
//
// Every source follows one pattern, as net.Listen and http.Serve do: a
// constructor (WatchLinks, WatchUEvents, NewPCIPoller, WatchFile,
// WatchSockets) does whatever can fail — opening a socket, taking a
// baseline — and returns it as an error; Run then blocks, sends events to
// the channel it is given, and returns nil once its context is done or the
// error that stopped it. Changes that happen between the constructor and
// Run are not lost: the agent can set a source up, read the state it
// watches, and only then start Run.
//
// Kernel sockets are read by a goroutine of their own that never waits for
// the consumer: events wait in a per-key buffer (per link name, device
// path or file name) where a later event replaces an earlier one, so a
// slow consumer sees every key's latest state and a burst can neither fill
// the socket nor block the reader.
package watch
