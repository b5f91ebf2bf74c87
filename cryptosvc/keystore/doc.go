// Package keystore opens the keystore that cipherd's settings name: the
// file keystore in a data directory, a read-only keyring file, or a
// PostgreSQL keystore (package cryptosvc/pgstore), each with the root key
// the settings name (package cryptosvc/rootkey), or, for the file
// keystore alone, the development root key kept next to the keys.
//
// It is how cipherd serve, its rootkey and keys commands and the tests of
// the deployment manifests open a store; a program that embeds the server
// may use it, or open any cryptosvc.Keystore its own way. The server
// package never opens a store: it is handed one (server.Config.Keystore),
// and whoever opened the store closes it after the server's Shutdown.
//
// For a file keystore, [Store.WatchRotation] serves the online root-key
// rotation requests of `cipherd rootkey rotate` while the store is open.
package keystore
