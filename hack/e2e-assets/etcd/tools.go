//go:build tools

// Package tools is never compiled; the import keeps the etcd server command
// in this module's requirement graph and go.sum.
package tools

import _ "go.etcd.io/etcd/server/v3"
