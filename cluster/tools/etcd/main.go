// Command etcd is the etcd v3 server, built from its Go module so that the local cluster
// needs nothing but the Go module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
