package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/atomicfile"
)

// cipherd keyring makes and edits the read-only keyring file that replicas
// share (server.Config.Keyring), for example as a Kubernetes Secret. Every
// file it writes is read back by cryptosvc.ReadKeyring, the parser the
// service uses, before it replaces the old one atomically (mode 0600).
// Material never reaches standard output or standard error.

const keyringUsage = `usage:
  cipherd keyring new -o FILE KEY...       create FILE with each KEY at a random version 1
  cipherd keyring add -f FILE KEY...       add keys, each at a random version 1
  cipherd keyring rotate -f FILE KEY...    add the next random version to each KEY
  cipherd keyring list [-json] -f FILE     keys, versions and dates (never material)

Replicas reading FILE (CIPHERD_KEYRING) pick up a change within seconds;
new data is sealed under each key's latest version, and older versions keep
decrypting. Run one editor at a time on a file.
`

func runKeyring(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, keyringUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("keyring "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, keyringUsage) }
	var file string
	var asJSON *bool
	switch sub {
	case "new":
		fs.StringVar(&file, "o", "", "the keyring file to create")
	case "add", "rotate", "list":
		fs.StringVar(&file, "f", "", "the keyring file")
		if sub == "list" {
			asJSON = fs.Bool("json", false, "print the keys as JSON")
		}
	default:
		fmt.Fprintf(stderr, "cipherd keyring: unknown command %q\n\n%s", sub, keyringUsage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	names := fs.Args()
	switch {
	case file == "":
		fmt.Fprintf(stderr, "cipherd keyring %s: the file is required\n\n%s", sub, keyringUsage)
		return 2
	case sub == "list" && len(names) > 0:
		fmt.Fprintf(stderr, "cipherd keyring list: unexpected argument %q\n", names[0])
		return 2
	case sub != "list" && len(names) == 0:
		fmt.Fprintf(stderr, "cipherd keyring %s: name at least one key\n", sub)
		return 2
	}
	for i, n := range names {
		if err := cryptosvc.ValidateKeyName(n); err != nil {
			fmt.Fprintf(stderr, "cipherd keyring %s: %q: %v\n", sub, n, err)
			return 2
		}
		if slices.Contains(names[:i], n) {
			fmt.Fprintf(stderr, "cipherd keyring %s: key %s named twice\n", sub, n)
			return 2
		}
	}

	var err error
	switch sub {
	case "list":
		err = keyringList(stdout, file, *asJSON)
	case "new":
		err = keyringNew(stdout, file, names)
	case "add":
		err = keyringEdit(stdout, file, names, keyringAdd)
	case "rotate":
		err = keyringEdit(stdout, file, names, keyringRotate)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cipherd keyring %s: %v\n", sub, err)
		return 1
	}
	return 0
}

// keyringRead reads and validates the keyring at path.
func keyringRead(path string) ([]*cryptosvc.StoredKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	keys, err := cryptosvc.ReadKeyring(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// keyringWrite encodes keys, checks that the service's parser accepts the
// result, and replaces path with it atomically.
func keyringWrite(path string, keys []*cryptosvc.StoredKey) error {
	var buf bytes.Buffer
	defer func() { clear(buf.Bytes()) }()
	if err := cryptosvc.WriteKeyring(&buf, keys); err != nil {
		return err
	}
	if _, err := cryptosvc.ReadKeyring(bytes.NewReader(buf.Bytes())); err != nil {
		return fmt.Errorf("the new keyring does not read back: %w", err)
	}
	return atomicfile.Write(path, buf.Bytes(), ".cipherd-keyring-")
}

// newVersion returns version v of a key, with fresh random material.
func newVersion(v uint32, now time.Time) (cryptosvc.StoredVersion, error) {
	sec, err := cryptosvc.GenerateSecret(rand.Reader)
	if err != nil {
		return cryptosvc.StoredVersion{}, err
	}
	return cryptosvc.StoredVersion{KeyVersion: cryptosvc.KeyVersion{Version: v, Created: now}, Secret: sec}, nil
}

func keyringNew(stdout io.Writer, path string, names []string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s exists; use add or rotate to change it", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	keys, err := keyringAdd(nil, names, now())
	if err != nil {
		return err
	}
	if err := keyringWrite(path, keys); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created %s: %s at version 1\n", path, strings.Join(names, ", "))
	return nil
}

// keyringEdit replaces the keyring at path with edit's result.
func keyringEdit(stdout io.Writer, path string, names []string, edit func([]*cryptosvc.StoredKey, []string, time.Time) ([]*cryptosvc.StoredKey, error)) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		// A rename would replace a symbolic link (a mounted Secret's
		// ..data), not the file it points to.
		return fmt.Errorf("%s is not a regular file; edit the file itself", path)
	}
	keys, err := keyringRead(path)
	if err != nil {
		return err
	}
	keys, err = edit(keys, names, now())
	if err != nil {
		return err
	}
	if err := keyringWrite(path, keys); err != nil {
		return err
	}
	for _, k := range keys {
		if slices.Contains(names, k.Name) {
			fmt.Fprintf(stdout, "%s: %s at version %d\n", path, k.Name, k.Latest().Version)
		}
	}
	return nil
}

func keyringAdd(keys []*cryptosvc.StoredKey, names []string, now time.Time) ([]*cryptosvc.StoredKey, error) {
	for _, n := range names {
		if slices.ContainsFunc(keys, func(k *cryptosvc.StoredKey) bool { return k.Name == n }) {
			return nil, fmt.Errorf("key %s exists; use rotate to add a version", n)
		}
		v, err := newVersion(1, now)
		if err != nil {
			return nil, err
		}
		keys = append(keys, &cryptosvc.StoredKey{Name: n, Created: now, Versions: []cryptosvc.StoredVersion{v}})
	}
	return keys, nil
}

func keyringRotate(keys []*cryptosvc.StoredKey, names []string, now time.Time) ([]*cryptosvc.StoredKey, error) {
	for _, n := range names {
		i := slices.IndexFunc(keys, func(k *cryptosvc.StoredKey) bool { return k.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("no key %s in the keyring", n)
		}
		k := keys[i].Clone()
		v, err := newVersion(k.Latest().Version+1, now)
		if err != nil {
			return nil, err
		}
		k.Versions = append(k.Versions, v)
		keys[i] = k
	}
	return keys, nil
}

func keyringList(stdout io.Writer, path string, asJSON bool) error {
	keys, err := keyringRead(path)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]cryptosvc.Key, len(keys)) // metadata only
		for i, k := range keys {
			out[i] = k.Describe()
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVERSION\tCREATED\tSTATE")
	for _, k := range keys {
		for _, v := range k.Versions {
			state := "decrypts"
			switch {
			case v.Version < k.Config.MinDecryptionVersion:
				state = "retired"
			case v.Version == k.Latest().Version:
				state = "latest"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", k.Name, v.Version, v.Created.UTC().Format(time.RFC3339), state)
		}
	}
	return tw.Flush()
}

// now is the creation time of new keys and versions, to the second.
func now() time.Time { return time.Now().UTC().Truncate(time.Second) }
