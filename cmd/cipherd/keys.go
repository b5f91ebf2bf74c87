package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/cryptosvc/rootkey"
)

// cipherd keys migrate copies every key of a file keystore or a keyring
// file into a PostgreSQL keystore, then proves that the destination holds
// each version: it opens the database afresh (every row unsealed under the
// root key) and opens, with each version as the database gives it, a
// message sealed under that version as the source gives it.

const keysUsage = "usage:\n" + keysMigrateSynopsis + keysMigrateHelp

const keysMigrateSynopsis = "  cipherd keys migrate -to URL (-from-dir DIR | -from-keyring FILE) [flags]\n"

const keysMigrateHelp = `
Copies every key, with all its versions and configuration, into the
PostgreSQL keystore at URL (postgres://…, libpq conventions), and verifies
that every version decrypts there. Safe to run again: a key already there
is left alone, or given the versions it lacks; a key whose versions differ
between the two stores is reported and not touched.

  -from-dir DIR         a file keystore directory (a stopped server's data_dir/keys)
  -from-keyring FILE    a keyring file, in the clear or sealed
  -root-key-uri URI     the root key of the destination: pkcs11:… or file:<path>
                        (default: CIPHERD_ROOT_KEY_URI)
  -root-key-file FILE   the root key of the destination, when no URI is given
                        (default: CIPHERD_ROOT_KEY_FILE, then CIPHERD_ROOT_KEY)
  -from-root-key-uri URI, -from-root-key-file FILE
                        the source's root key, when it differs
  -from-dev-root-key    the source is a development keystore: its root key is
                        DIR/root.key (the default when that file exists)

The source's root key is, in this order: the one -from-root-key-uri or
-from-root-key-file gives; the development root key, for a -from-dir
keystore that holds one (a server started without a root key made it, as
'go run ./cmd/cipherd' does); else the destination's.
`

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if kc := keysAPICommand(args[0]); kc != nil {
			return runKeysAPI(ctx, kc, args[1:], stdout, stderr)
		}
	}
	if len(args) == 0 || args[0] != "migrate" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			keysCLIUsage(stderr)
			return 0
		}
		if len(args) > 0 {
			fmt.Fprintf(stderr, "cipherd keys: unknown command %q\n\n", args[0])
		}
		keysCLIUsage(stderr)
		return 2
	}
	fs := flag.NewFlagSet("keys migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, keysUsage) }
	to := fs.String("to", "", "")
	fromDir := fs.String("from-dir", "", "")
	fromKeyring := fs.String("from-keyring", "", "")
	rootURI := fs.String("root-key-uri", os.Getenv(rootkey.EnvURI), "")
	rootFile := fs.String("root-key-file", os.Getenv(cryptosvc.EnvRootKeyFile), "")
	fromRootURI := fs.String("from-root-key-uri", "", "")
	fromRootFile := fs.String("from-root-key-file", "", "")
	fromDev := fs.Bool("from-dev-root-key", false, "")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *to == "" || (*fromDir == "") == (*fromKeyring == "") || fs.NArg() > 0 {
		fmt.Fprint(stderr, keysUsage)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "cipherd keys migrate:", err)
		return 1
	}
	root, err := rootkey.Open(ctx, rootkey.Config{URI: *rootURI, File: *rootFile})
	if err == nil && root == nil {
		err = fmt.Errorf("%w: the destination needs a root key: give -root-key-uri, -root-key-file, %s, %s or %s", cryptosvc.ErrRootKey, rootkey.EnvURI, cryptosvc.EnvRootKeyFile, cryptosvc.EnvRootKey)
	}
	if err != nil {
		return fail(err)
	}
	defer rootkey.Close(root)
	src, err := openSource(ctx, sourceConfig{dir: *fromDir, keyring: *fromKeyring, uri: *fromRootURI, file: *fromRootFile, dev: *fromDev}, root)
	if err != nil {
		return fail(err)
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, pgstore.Config{DSN: *to, RootKeyProvider: root})
	if err != nil {
		return fail(err)
	}
	names, err := src.List(ctx)
	if err != nil {
		dst.Close()
		return fail(err)
	}
	failed := 0
	for _, name := range names {
		k, err := src.Get(ctx, name)
		if err == nil {
			var what string
			what, err = migrateKey(ctx, dst, k)
			if err == nil {
				fmt.Fprintf(stdout, "%s: %s\n", name, what)
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			failed++
		}
	}
	dst.Close()

	// Verify against a fresh open: every row unsealed from the database.
	check, err := pgstore.Open(ctx, pgstore.Config{DSN: *to, RootKeyProvider: root})
	if err != nil {
		return fail(fmt.Errorf("verifying: %w", err))
	}
	defer check.Close()
	versions := 0
	for _, name := range names {
		k, err := src.Get(ctx, name)
		if err == nil {
			err = verifyKey(ctx, k, check)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: verification failed: %v\n", name, err)
			failed++
			continue
		}
		versions += len(k.Versions)
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "cipherd keys migrate: %d problems\n", failed)
		return 1
	}
	fmt.Fprintf(stdout, "verified: %d keys, %d versions decrypt in the destination\n", len(names), versions)
	return 0
}

// sourceConfig is the source of a migration and its root key as the flags
// give them.
type sourceConfig struct {
	dir, keyring string // -from-dir, -from-keyring
	uri, file    string // -from-root-key-uri, -from-root-key-file
	dev          bool   // -from-dev-root-key
}

// openSource opens the source read-only in effect (migrate only reads it)
// with its root key: the one sc names, else the development root key of a
// file keystore that holds one, else dst, the destination's. The store
// closes the provider it opened when it closes.
func openSource(ctx context.Context, sc sourceConfig, dst cryptosvc.RootKeyProvider) (cryptosvc.Keystore, error) {
	var own cryptosvc.RootKeyProvider // opened here for the source
	switch {
	case sc.uri != "":
		p, err := rootkey.OpenURI(ctx, sc.uri)
		if err != nil {
			return nil, fmt.Errorf("the source's root key: %w", err)
		}
		own = p
	case sc.file != "":
		p, err := rootkey.Open(ctx, rootkey.Config{File: sc.file})
		if err != nil {
			return nil, fmt.Errorf("the source's root key: %w", err)
		}
		own = p
	}
	p := dst
	if own != nil {
		p = own
	}
	var st cryptosvc.Keystore
	var err error
	if sc.keyring != "" {
		st, err = cryptosvc.OpenKeyring(sc.keyring, cryptosvc.KeyringConfig{PollInterval: -1, RootKeyProvider: p})
	} else {
		st, err = openSourceDir(sc, own, p)
	}
	if err != nil {
		rootkey.Close(own)
		return nil, err
	}
	return closingStore{st, own}, nil
}

// openSourceDir opens the file keystore in sc.dir: with the development
// root key it holds when no root key for the source is given (own is nil),
// else with p.
func openSourceDir(sc sourceConfig, own, p cryptosvc.RootKeyProvider) (cryptosvc.Keystore, error) {
	if _, err := os.Stat(filepath.Join(sc.dir, "root.check")); err != nil {
		return nil, fmt.Errorf("%s is not a file keystore (no root.check): %w", sc.dir, err)
	}
	_, err := os.Stat(filepath.Join(sc.dir, "root.key"))
	haveDev := err == nil
	if sc.dev && !haveDev {
		// OpenFileStore would make a new development root key, which
		// opens nothing in this store.
		return nil, fmt.Errorf("%w: -from-dev-root-key: %s holds no development root key (root.key)", cryptosvc.ErrRootKey, sc.dir)
	}
	cfg := cryptosvc.FileStoreConfig{RootKeyProvider: p}
	if sc.dev || (haveDev && own == nil) {
		cfg = cryptosvc.FileStoreConfig{DevRootKey: true}
	}
	return cryptosvc.OpenFileStore(sc.dir, cfg)
}

// closingStore is a source keystore that closes its own root key after
// itself.
type closingStore struct {
	cryptosvc.Keystore
	root cryptosvc.RootKeyProvider
}

func (s closingStore) Close() error {
	err := s.Keystore.Close()
	rootkey.Close(s.root)
	return err
}

// migrateKey puts k into dst and says what it did.
func migrateKey(ctx context.Context, dst cryptosvc.Keystore, k *cryptosvc.StoredKey) (string, error) {
	cur, err := dst.Refresh(ctx, k.Name, nil)
	if errors.Is(err, cryptosvc.ErrKeyNotFound) {
		if err := dst.Create(ctx, k); err != nil {
			return "", err
		}
		return fmt.Sprintf("created with %d versions", len(k.Versions)), nil
	}
	if err != nil {
		return "", err
	}
	if cryptosvc.CheckAppendOnly(k, cur) == nil {
		if len(cur.Versions) > len(k.Versions) {
			return fmt.Sprintf("already there, with %d versions more than the source", len(cur.Versions)-len(k.Versions)), nil
		}
		return "already there", nil
	}
	if k.MinAvailable > cur.MinAvailable {
		// The store would take it as a trim: copying never destroys.
		return "", errors.New("the source was trimmed of versions the destination holds: not touched")
	}
	if cryptosvc.CheckAppendOnly(cur, k) != nil {
		return "", errors.New("the destination holds a key of this name with other versions: not touched")
	}
	next := k.Clone()
	next.Config = cur.Config // the destination's configuration stays: it may have been changed there
	if next.Config.Validate(next.Latest().Version) != nil {
		next.Config = k.Config
	}
	next.Revision = cur.Revision
	if err := dst.Update(ctx, next); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d versions added", len(k.Versions)-len(cur.Versions)), nil
}

// verifyKey seals a message under each of src's versions with the source's
// material and opens it with the destination's.
func verifyKey(ctx context.Context, src *cryptosvc.StoredKey, dst cryptosvc.Keystore) error {
	got, err := dst.Get(ctx, src.Name)
	if err != nil {
		return err
	}
	for i := range src.Versions {
		want := &src.Versions[i]
		have := got.Version(want.Version)
		if have == nil {
			return fmt.Errorf("version %d is missing", want.Version)
		}
		sealer, err := versionService(src.Name, want)
		if err != nil {
			return err
		}
		opener, err := versionService(src.Name, have)
		if err != nil {
			return err
		}
		probe := []byte("cipherd keys migrate verification")
		ct, _, err := sealer.Seal(ctx, src.Name, probe, []byte(src.Name))
		if err != nil {
			return err
		}
		if _, _, err := opener.Open(ctx, src.Name, ct, []byte(src.Name)); err != nil {
			return fmt.Errorf("version %d does not decrypt: %w", want.Version, err)
		}
	}
	return nil
}

// versionService is a Service whose key name seals under version v alone.
func versionService(name string, v *cryptosvc.StoredVersion) (*cryptosvc.Service, error) {
	k := &cryptosvc.StoredKey{Name: name, Created: v.Created}
	for n := uint32(1); n <= v.Version; n++ {
		sec := v.Secret
		if n < v.Version {
			// Versions before v are never used: any material will do.
			var err error
			if sec, err = cryptosvc.NewSecret(make([]byte, cryptosvc.SecretSize)); err != nil {
				return nil, err
			}
		}
		k.Versions = append(k.Versions, cryptosvc.StoredVersion{KeyVersion: cryptosvc.KeyVersion{Version: n, Created: v.Created}, Secret: sec})
	}
	mem := cryptosvc.NewMemStore()
	if err := mem.Create(context.Background(), k); err != nil {
		return nil, err
	}
	return cryptosvc.New(cryptosvc.Config{Keystore: mem})
}
