//go:build tools

// Package tools is never compiled; its imports keep the commands that
// hack/e2e-assets.sh builds in this module's requirement graph and go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
