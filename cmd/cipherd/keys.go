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
)

// cipherd keys migrate copies every key of a file keystore or a keyring
// file into a PostgreSQL keystore, then proves that the destination holds
// each version: it opens the database afresh (every row unsealed under the
// root key) and opens, with each version as the database gives it, a
// message sealed under that version as the source gives it.

const keysUsage = `usage:
  cipherd keys migrate -to URL (-from-dir DIR | -from-keyring FILE) [flags]

Copies every key, with all its versions and configuration, into the
PostgreSQL keystore at URL (postgres://…, libpq conventions), and verifies
that every version decrypts there. Safe to run again: a key already there
is left alone, or given the versions it lacks; a key whose versions differ
between the two stores is reported and not touched.

  -from-dir DIR         a file keystore directory (a stopped server's data_dir/keys)
  -from-keyring FILE    a keyring file
  -root-key-file FILE   the root key of the destination, and of a -from-dir
                        source (default: CIPHERD_ROOT_KEY_FILE, then CIPHERD_ROOT_KEY)
  -from-root-key-file FILE
                        the source's root key, when it differs
  -from-dev-root-key    the source is a development keystore: its root key is DIR/root.key
`

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "migrate" {
		fmt.Fprint(stderr, keysUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			return 0
		}
		return 2
	}
	fs := flag.NewFlagSet("keys migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, keysUsage) }
	to := fs.String("to", "", "")
	fromDir := fs.String("from-dir", "", "")
	fromKeyring := fs.String("from-keyring", "", "")
	rootFile := fs.String("root-key-file", "", "")
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
	if *rootFile == "" {
		*rootFile = os.Getenv(cryptosvc.EnvRootKeyFile)
	}
	root, err := cryptosvc.LoadRootKey(*rootFile, cryptosvc.EnvRootKey)
	if err != nil {
		return fail(err)
	}
	src, err := openSource(*fromDir, *fromKeyring, &root, *fromRootFile, *fromDev)
	if err != nil {
		return fail(err)
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, pgstore.Config{DSN: *to, RootKey: &root})
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
	check, err := pgstore.Open(ctx, pgstore.Config{DSN: *to, RootKey: &root})
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

func openSource(dir, keyring string, root *cryptosvc.Secret, rootFile string, dev bool) (cryptosvc.Keystore, error) {
	if keyring != "" {
		return cryptosvc.OpenKeyring(keyring, cryptosvc.KeyringConfig{PollInterval: -1})
	}
	cfg := cryptosvc.FileStoreConfig{RootKey: root}
	switch {
	case dev:
		r, err := cryptosvc.LoadRootKey(filepath.Join(dir, "root.key"), "")
		if err != nil {
			return nil, err
		}
		cfg.RootKey = &r
	case rootFile != "":
		r, err := cryptosvc.LoadRootKey(rootFile, "")
		if err != nil {
			return nil, err
		}
		cfg.RootKey = &r
	}
	if _, err := os.Stat(filepath.Join(dir, "root.check")); err != nil {
		return nil, fmt.Errorf("%s is not a file keystore (no root.check): %w", dir, err)
	}
	return cryptosvc.OpenFileStore(dir, cfg)
}

// migrateKey puts k into dst and says what it did.
func migrateKey(ctx context.Context, dst cryptosvc.Keystore, k *cryptosvc.StoredKey) (string, error) {
	cur, err := dst.Refresh(ctx, k.Name)
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
