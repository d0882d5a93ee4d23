// Command etcd runs the etcd server built from go.etcd.io/etcd/server/v3,
// so that the test environment needs no etcd from elsewhere.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
