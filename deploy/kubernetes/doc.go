// Package kubernetes holds cipherd's Kubernetes manifests (the YAML files in
// this directory) and, in its tests, the checks that keep them true: every
// manifest decodes strictly into the Kubernetes API types, and what it says
// about cipherd — port, probe paths, CIPHERD_* variables, configuration file,
// Secret keys and mount paths, shutdown timing — holds for a real cipherd
// server started from it. It is a module of its own so that k8s.io/api stays
// out of cipherd's go.mod:
//
//	cd deploy/kubernetes && go test ./...
package kubernetes
