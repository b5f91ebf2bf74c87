package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/keystore"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/cryptosvc/pkcs11"
	"github.com/cipherd/cipherd/cryptosvc/rootkey"
	"github.com/cipherd/cipherd/internal/atomicfile"
)

const rootkeyUsage = `usage: cipherd rootkey <command> [flags]

  init   -uri URI       generate the root key in a PKCS#11 token
  rotate -to URI        move the keystore (file or PostgreSQL) to another
                        root key
  seal-keyring -in F -out F [-from URI] [-to URI]
                        seal a keyring file under a root key (or re-seal it
                        under another): the keys are then not in the clear

URIs are pkcs11:… (RFC 7512: token, object, module-path, pin-source) or
file:<path> (a static root key, 32 bytes as base64 or hex). Without -uri,
init takes root_key_uri from -config or CIPHERD_ROOT_KEY_URI.

rotate, on the file keystore, re-seals every key under a new storage key
wrapped by the new root key. On a stopped store it runs here; on a store a
running cipherd holds, it asks that server to rotate while it keeps serving.
Either way, a rotation cut short is finished by running the same command
again. On a PostgreSQL keystore (keystore, CIPHERD_KEYSTORE) it re-wraps the
database's storage key under the new root key in one transaction, while the
replicas keep serving. Then set root_key_uri to the new URI before each
server's next start.
`

func runRootkey(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, rootkeyUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "init":
		return runRootkeyInit(ctx, args[1:], stdout, stderr)
	case "rotate":
		return runRootkeyRotate(ctx, args[1:], stdout, stderr)
	case "seal-keyring":
		return runRootkeySealKeyring(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "cipherd rootkey: unknown command %q\n\n%s", args[0], rootkeyUsage)
	return 2
}

// rootkeyConfig is the keystore configuration the rootkey commands share
// with serve: -config (or CIPHERD_CONFIG), the environment, then -data-dir.
// On false the command exits with code.
func rootkeyConfig(fs *flag.FlagSet, args []string, stderr io.Writer) (_ *keystore.Config, ok bool, code int) {
	configFile := fs.String("config", os.Getenv("CIPHERD_CONFIG"), "YAML configuration file (CIPHERD_CONFIG)")
	dataDir := fs.String("data-dir", "", "data directory (default ./cipherd-data; CIPHERD_DATA_DIR)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil, false, 0
	} else if err != nil {
		return nil, false, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cipherd rootkey %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return nil, false, 2
	}
	cfg, _, err := readConfig(*configFile)
	if err == nil {
		err = cfg.ApplyEnv(os.Getenv)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cipherd rootkey %s: %v\n", fs.Name(), err)
		return nil, false, 2
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	cfg = cfg.Defaults()
	sc := storeSettings(&cfg)
	return &sc, true, 0
}

func runRootkeyInit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	uri := fs.String("uri", "", "PKCS#11 URI of the key to create (default: root_key_uri)")
	cfg, ok, code := rootkeyConfig(fs, args, stderr)
	if !ok {
		return code
	}
	if *uri == "" {
		*uri = cfg.RootKey.URI
	}
	if *uri == "" {
		fmt.Fprintln(stderr, "cipherd rootkey init: give -uri pkcs11:… (or root_key_uri, CIPHERD_ROOT_KEY_URI)")
		return 2
	}
	p, err := pkcs11.Generate(ctx, *uri)
	if err != nil {
		fmt.Fprintln(stderr, "cipherd rootkey init:", err)
		return 1
	}
	defer p.Close()
	fmt.Fprintf(stdout, "created %s: AES-256, sensitive, not extractable, encrypt and decrypt only\n", p)
	return 0
}

// openRootKey opens the root key of uri, or the configured one (nil for
// none) when uri is empty.
func openRootKey(ctx context.Context, cfg *keystore.Config, uri string) (cryptosvc.RootKeyProvider, error) {
	if uri != "" {
		return rootkey.OpenURI(ctx, uri)
	}
	return rootkey.Open(ctx, cfg.RootKey)
}

// resealingLine is what `rootkey rotate` writes on standard error when both
// root keys are open and the re-seal of the store starts.
const resealingLine = "cipherd rootkey rotate: both root keys open; re-sealing the keystore"

func runRootkeyRotate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rotate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.String("to", "", "URI of the new root key: pkcs11:… or file:<path> (required)")
	from := fs.String("from", "", "URI of the current root key (default: the configured one; ignored when a server holds the store)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for a running server's answer")
	cfg, ok, code := rootkeyConfig(fs, args, stderr)
	if !ok {
		return code
	}
	if *to == "" {
		fmt.Fprintln(stderr, "cipherd rootkey rotate: -to is required")
		return 2
	}
	if cfg.Postgres != "" {
		return rotatePostgres(ctx, cfg, *from, *to, stdout, stderr)
	}
	if cfg.Keyring != "" {
		fmt.Fprintln(stderr, "cipherd rootkey rotate: the configuration uses a keyring file, not the file keystore: nothing to rotate here")
		return 2
	}
	dir := cfg.FileStoreDir()
	name, gen, where, err := rotateStore(ctx, cfg, dir, *from, *to, *timeout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "cipherd rootkey rotate:", err)
		return 1
	}
	fmt.Fprintf(stdout, "root key rotated %s: the keystore in %s is sealed under storage key generation %d, wrapped by %s\n", where, dir, gen, name)
	fmt.Fprintf(stdout, "set root_key_uri (or %s) to the new URI before the server's next start\n", rootkey.EnvURI)
	return 0
}

// rotateStore rotates here if no process holds dir, and otherwise asks the
// server that does. Rotating here, it says on progress when both root keys
// are open and the re-seal starts.
func rotateStore(ctx context.Context, cfg *keystore.Config, dir, from, to string, timeout time.Duration, progress io.Writer) (string, uint32, string, error) {
	online := func() (string, uint32, string, error) {
		name, gen, err := rootkey.RequestRotation(ctx, dir, to, timeout)
		return name, gen, "by the running server", err
	}
	if inUse, err := cryptosvc.FileStoreInUse(dir); err != nil {
		return "", 0, "", err
	} else if inUse {
		return online()
	}
	cur, err := openRootKey(ctx, cfg, from)
	if err != nil {
		return "", 0, "", fmt.Errorf("the current root key: %w", err)
	}
	defer rootkey.Close(cur)
	store, err := cryptosvc.OpenFileStore(dir, cryptosvc.FileStoreConfig{RootKeyProvider: cur, DevRootKey: cur == nil})
	if errors.Is(err, cryptosvc.ErrLocked) {
		return online() // a server started meanwhile
	}
	if err != nil {
		return "", 0, "", err
	}
	defer store.Close()
	next, err := rootkey.OpenURI(ctx, to)
	if err != nil {
		return "", 0, "", fmt.Errorf("the new root key: %w", err)
	}
	defer rootkey.Close(next)
	fmt.Fprintln(progress, resealingLine)
	if err := store.RotateRootKey(ctx, next); err != nil {
		return "", 0, "", err
	}
	name, gen, _ := store.RootKey()
	return name, gen, "here", nil
}

// rotatePostgres re-wraps a PostgreSQL keystore's storage key under the
// root key to.
func rotatePostgres(ctx context.Context, cfg *keystore.Config, from, to string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "cipherd rootkey rotate:", err)
		return 1
	}
	cur, err := openRootKey(ctx, cfg, from)
	if err != nil {
		return fail(fmt.Errorf("the current root key: %w", err))
	}
	defer rootkey.Close(cur)
	next, err := rootkey.OpenURI(ctx, to)
	if err != nil {
		return fail(fmt.Errorf("the new root key: %w", err))
	}
	defer rootkey.Close(next)
	w, rotated, err := pgstore.RotateRootKey(ctx, cfg.Postgres, cur, next)
	if err != nil {
		return fail(err)
	}
	if rotated {
		fmt.Fprintf(stdout, "root key rotated: the PostgreSQL keystore's storage key (generation %d) is wrapped by %s\n", w.Generation, next)
	} else {
		fmt.Fprintf(stdout, "nothing to do: the PostgreSQL keystore's storage key (generation %d) is already wrapped by %s\n", w.Generation, next)
	}
	fmt.Fprintf(stdout, "set root_key_uri (or %s) to the new URI before each replica's next start\n", rootkey.EnvURI)
	return 0
}

func runRootkeySealKeyring(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seal-keyring", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "keyring file to read, in the clear or sealed (required)")
	out := fs.String("out", "", "sealed keyring file to write, mode 0600 (required)")
	from := fs.String("from", "", "URI of the root key that sealed -in (default: the configured one)")
	to := fs.String("to", "", "URI of the root key to seal under (default: the configured one)")
	cfg, ok, code := rootkeyConfig(fs, args, stderr)
	if !ok {
		return code
	}
	if *in == "" || *out == "" {
		fmt.Fprintln(stderr, "cipherd rootkey seal-keyring: -in and -out are required")
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "cipherd rootkey seal-keyring:", err)
		return 1
	}
	src, err := openRootKey(ctx, cfg, *from)
	if err != nil {
		return fail(err)
	}
	defer rootkey.Close(src)
	f, err := os.Open(*in)
	if err != nil {
		return fail(err)
	}
	keys, err := cryptosvc.ReadSealedKeyring(ctx, f, src)
	f.Close()
	if err != nil {
		return fail(err)
	}
	dst, err := openRootKey(ctx, cfg, *to)
	if err != nil {
		return fail(err)
	}
	defer rootkey.Close(dst)
	if dst == nil {
		return fail(errors.New("no root key to seal under: give -to, root_key_uri or root_key_file"))
	}
	var buf bytes.Buffer
	if err := cryptosvc.WriteSealedKeyring(ctx, &buf, keys, dst); err != nil {
		return fail(err)
	}
	if err := atomicfile.Write(*out, buf.Bytes(), ".tmp-"); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "%s: %d keys sealed under %s\n", *out, len(keys), dst)
	return 0
}
