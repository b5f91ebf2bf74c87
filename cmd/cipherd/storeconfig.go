package main

import (
	"github.com/cipherd/cipherd/cryptosvc/keystore"
	"github.com/cipherd/cipherd/cryptosvc/rootkey"
	"github.com/cipherd/cipherd/server"
)

// storeSettings returns what names the keystore and its root key in cfg
// (after Defaults): data_dir, keyring, keystore, root_key_uri and
// root_key_file, as serve and the rootkey and keys commands read them.
func storeSettings(cfg *server.Config) keystore.Config {
	return keystore.Config{
		DataDir:  cfg.DataDir,
		Keyring:  cfg.Keyring,
		Postgres: cfg.KeystoreURL,
		RootKey:  rootkey.Config{URI: cfg.RootKeyURI, File: cfg.RootKeyFile},
	}
}
