package main

import (
	"path/filepath"

	"github.com/cipherd/cipherd/cryptosvc/rootkey"
	"github.com/cipherd/cipherd/server"
)

// storeConfig is what names the keystore and its root key: the settings
// data_dir, keyring, keystore, root_key_uri and root_key_file, as serve and
// the rootkey and keys commands read them.
type storeConfig struct {
	DataDir  string         // the file keystore is DataDir/keys
	Keyring  string         // a read-only keyring file instead, if set
	Postgres string         // a PostgreSQL keystore's URL instead, if set
	RootKey  rootkey.Config // its root key; none at all is the development key
}

// storeSettings returns the keystore settings of cfg, after Defaults.
func storeSettings(cfg *server.Config) storeConfig {
	return storeConfig{
		DataDir:  cfg.DataDir,
		Keyring:  cfg.Keyring,
		Postgres: cfg.Keystore,
		RootKey:  rootkey.Config{URI: cfg.RootKeyURI, File: cfg.RootKeyFile},
	}
}

// fileStoreDir is the file keystore's directory.
func (c *storeConfig) fileStoreDir() string { return filepath.Join(c.DataDir, "keys") }
