package main

import (
	"net"
	"time"

	"k8s.io/client-go/rest"
)

// http1 makes every client of cfg (the manager's cache and client share one) speak HTTP/1.1 to
// the API server, as vm-controller does (its config.go): a connection per request in flight,
// kept for the next (client-go keeps up to 25 idle per host), instead of client-go's one
// multiplexed HTTP/2 connection. HTTP/2's per-request costs (header compression into a shared
// table, a goroutine and two flushes per request, flow-control frames) fall on both the
// controller and the API server, which bounds a burst on this machine: a comparison in which
// only one side paid them would measure the transport, not the controllers.
//
// client-go leaves HTTP/2 out when the TLS config names protocols without h2. In place of
// HTTP/2's health check (a ping after 30 s of silence), TCP keep-alive probes start after
// 15 s of silence and give up on a dead connection, and so on a watch stuck on it, after 3
// unanswered probes 5 s apart.
func http1(cfg *rest.Config) {
	cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	cfg.Dial = (&net.Dialer{
		Timeout:         30 * time.Second, // client-go's own dialer's
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3},
	}).DialContext
}
