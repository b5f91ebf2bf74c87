package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
)

// cipherd keys list, show, create, rotate, config and delete manage keys
// through a running server's key API (/v1/keys) with the Go client, as
// the caller its token or client certificate names. They reach the server
// as encrypt and decrypt do (clientFlags). Each subcommand is one entry of
// keysCommands: its synopsis, its help line, and a function that adds its
// own flags and returns what runs it.

// A keysCommand is a subcommand of cipherd keys that works through the
// key API.
type keysCommand struct {
	name     string
	synopsis string   // its flags and arguments, after "cipherd keys NAME"
	help     []string // what it does, in lines of cipherd keys -h
	key      bool     // it takes one argument: the key's name
	json     bool     // the service answers with JSON, which -json prints
	// define adds the subcommand's own flags to fs and returns what runs
	// it once they are parsed.
	define func(fs *flag.FlagSet) keysAction
}

// A keysAction runs a subcommand for the key name (empty for list) and
// returns what to print. An error of type usageError is the caller's
// mistake (exit 2); any other, the service's answer or the transport's
// failure (exit 1).
type keysAction func(ctx context.Context, c *client.Client, name string) (keysResult, error)

// keysResult is what a subcommand prints on standard output: json with
// -json, the API's answer as it came (nothing when nil); else text.
type keysResult struct {
	json any
	text func(w io.Writer) error
}

// usageError is a mistake in the command line found after parsing.
type usageError string

func (e usageError) Error() string { return string(e) }

var keysCommands = []keysCommand{
	{name: "list", synopsis: "list [-json] [flags]", json: true,
		help:   []string{"the keys the caller may read, a line each"},
		define: func(*flag.FlagSet) keysAction { return keysList }},
	{name: "show", synopsis: "show NAME [-json] [flags]", key: true, json: true,
		help:   []string{"a key's settings and its versions"},
		define: func(*flag.FlagSet) keysAction { return keysShow }},
	{name: "create", synopsis: "create NAME [SETTINGS] [--import FILE] [-json] [flags]", key: true, json: true,
		help:   []string{"a key with the settings given; its first version random, or the 32", "bytes --import FILE holds (raw or base64; - for standard input)"},
		define: keysCreate},
	{name: "rotate", synopsis: "rotate NAME [--import FILE] [-json] [flags]", key: true, json: true,
		help:   []string{"a new version that seals new data from now on (random, or --import", "FILE's); the older versions keep decrypting"},
		define: keysRotate},
	{name: "config", synopsis: "config NAME SETTINGS [-json] [flags]", key: true, json: true,
		help:   []string{"changes the settings given and keeps the others; an empty value", "(--aead '', --min-decryption-version 0) returns one to its default"},
		define: keysConfig},
	{name: "delete", synopsis: "delete NAME [--wait D] [-json] [flags]", key: true, json: true,
		help:   []string{"schedules the deletion of a key whose deletion_allowed is set, after", "the server's default wait or --wait; until then the key serves nothing", "and 'cipherd keys cancel' restores it"},
		define: keysDelete},
	{name: "cancel", synopsis: "cancel NAME [-json] [flags]", key: true, json: true,
		help:   []string{"cancels a key's scheduled deletion: it serves again, every version", "intact"},
		define: func(*flag.FlagSet) keysAction { return keysCancel }},
	{name: "disable", synopsis: "disable NAME --version N [-json] [flags]", key: true, json: true,
		help:   []string{"disables version N: it neither seals nor opens until enabled again"},
		define: keysVersionAction((*client.Client).DisableKeyVersion)},
	{name: "enable", synopsis: "enable NAME --version N [-json] [flags]", key: true, json: true,
		help:   []string{"enables a disabled version again"},
		define: keysVersionAction((*client.Client).EnableKeyVersion)},
	{name: "trim", synopsis: "trim NAME --min-available-version N --confirm NAME [-json] [flags]", key: true, json: true,
		help:   []string{"destroys the versions below N for good: what they sealed never opens", "again; N may not pass min_decryption_version, and --confirm repeats", "the key's name"},
		define: keysTrim},
	{name: "backup", synopsis: "backup NAME [-o FILE] [--under root|backup_key] [--raw] [flags]", key: true,
		help:   []string{"writes a backup of an exportable key, with its material, sealed under", "the server's backup key or root key, in base64 (--raw: bytes) to -o FILE", "(created 0600) or to standard output when it is not a terminal"},
		define: keysBackup},
	{name: "restore", synopsis: "restore [-i FILE] [--name NEW] [-json] [flags]", json: true,
		help:   []string{"creates the key a backup holds (raw or base64, from -i FILE or standard", "input), under its name or --name NEW"},
		define: keysRestore},
}

const keysCLIHelp = `SETTINGS are the fields of a key's configuration (docs/API.md, Keys):
--aead AEAD, --allowed-aeads A,B, --rotation-period D,
--min-decryption-version N, --deletion-allowed[=false] and (at creation
only) --exportable; 'cipherd keys config -h' says what each does.

create, rotate and config print the key as show does; -json prints the
service's JSON answer instead of a table. Flags may come before or after
NAME. An error prints the service's code and message and exits 1; a usage
error exits 2.

The server is --server or CIPHERD_URL (its CA --ca or CIPHERD_CA). The
caller is the token of --token, --token-file, CIPHERD_TOKEN or
CIPHERD_TOKEN_FILE, or an mTLS identity's client certificate, --cert and
--key-file or CIPHERD_CLIENT_CERT and CIPHERD_CLIENT_KEY. list and show
need the operation keys-read on the key; backup and restore keys-backup,
which "*" does not grant; the others keys-admin.
'cipherd keys SUBCOMMAND -h' lists a subcommand's flags.
`

// keysCLIUsage writes the usage of every subcommand of cipherd keys.
func keysCLIUsage(w io.Writer) {
	fmt.Fprintln(w, "usage:")
	for _, kc := range keysCommands {
		fmt.Fprintf(w, "  cipherd keys %s\n", kc.synopsis)
	}
	fmt.Fprint(w, keysMigrateSynopsis)
	fmt.Fprintln(w)
	for _, kc := range keysCommands {
		for i, line := range kc.help {
			name := ""
			if i == 0 {
				name = kc.name
			}
			fmt.Fprintf(w, "  %-8s %s\n", name, line)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, keysCLIHelp)
	fmt.Fprint(w, "\nmigrate works on the stores themselves, with no server.\n")
	fmt.Fprint(w, keysMigrateHelp)
}

// keysAPICommand returns the subcommand called name, or nil.
func keysAPICommand(name string) *keysCommand {
	for i := range keysCommands {
		if keysCommands[i].name == name {
			return &keysCommands[i]
		}
	}
	return nil
}

// runKeysAPI runs the subcommand kc with args, its flags and arguments.
func runKeysAPI(ctx context.Context, kc *keysCommand, args []string, stdout, stderr io.Writer) int {
	prefix := "cipherd keys " + kc.name
	fs := flag.NewFlagSet("keys "+kc.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: cipherd keys %s\n\n", kc.synopsis)
		help := strings.Join(kc.help, "\n")
		fmt.Fprintf(stderr, "%s.\n", strings.ToUpper(help[:1])+help[1:])
		fmt.Fprintln(stderr)
		fmt.Fprint(stderr, keysCLIHelp)
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	var cf clientFlags
	cf.register(fs, true)
	asJSON := false
	if kc.json {
		fs.BoolVar(&asJSON, "json", false, "print the service's answer as JSON")
	}
	action := kc.define(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	name := ""
	switch {
	case kc.key && len(pos) != 1:
		fmt.Fprintf(stderr, "%s: name one key\n", prefix)
		return 2
	case kc.key:
		name = pos[0]
	case len(pos) > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", prefix, pos[0])
		return 2
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", prefix, errText(err))
		return 2
	}
	res, err := action(ctx, c, name)
	if err == nil {
		switch {
		case asJSON && res.json != nil:
			err = writeJSON(stdout, res.json)
		case !asJSON && res.text != nil:
			err = res.text(stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", prefix, errText(err))
		// A name the client refused to send (invalid_key_name) is a
		// mistake in the command line too.
		if ce := (*client.Error)(nil); errors.As(err, &ce) && ce.Status == 0 || errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	return 0
}

func keysList(ctx context.Context, c *client.Client, _ string) (keysResult, error) {
	keys, err := c.ListKeys(ctx)
	if err != nil {
		return keysResult{}, err
	}
	if keys == nil {
		keys = []api.Key{}
	}
	return keysResult{json: &api.KeyList{Keys: keys}, text: func(w io.Writer) error { return printKeyTable(w, keys) }}, nil
}

func keysShow(ctx context.Context, c *client.Client, name string) (keysResult, error) {
	return keyResult(c.DescribeKey(ctx, name))
}

func keysCreate(fs *flag.FlagSet) keysAction {
	var cfg api.KeyConfig
	keyConfigFlags(fs, &cfg)
	material := fs.String("import", "", "the first version's 32 bytes, raw or base64, from `FILE` (- for standard input) instead of random ones")
	return func(ctx context.Context, c *client.Client, name string) (keysResult, error) {
		req := api.CreateKeyRequest{KeyConfig: cfg}
		if *material != "" {
			var err error
			if req.Import, err = readMaterial(*material); err != nil {
				return keysResult{}, err
			}
			defer clear(req.Import)
		}
		return keyResult(c.CreateKey(ctx, name, req))
	}
}

func keysRotate(fs *flag.FlagSet) keysAction {
	material := fs.String("import", "", "the new version's 32 bytes, raw or base64, from `FILE` (- for standard input) instead of random ones")
	return func(ctx context.Context, c *client.Client, name string) (keysResult, error) {
		if *material == "" {
			return keyResult(c.RotateKey(ctx, name))
		}
		b, err := readMaterial(*material)
		if err != nil {
			return keysResult{}, err
		}
		defer clear(b)
		return keyResult(c.RotateKeyImport(ctx, name, b))
	}
}

func keysConfig(fs *flag.FlagSet) keysAction {
	var cfg api.KeyConfig
	keyConfigFlags(fs, &cfg)
	return func(ctx context.Context, c *client.Client, name string) (keysResult, error) {
		patch, n := keyConfigPatch(fs, cfg)
		if n == 0 {
			return keysResult{}, usageError("give a setting to change: --aead, --allowed-aeads, --rotation-period, --min-decryption-version or --deletion-allowed")
		}
		return keyResult(c.UpdateKeyConfig(ctx, name, patch))
	}
}

func keysDelete(fs *flag.FlagSet) keysAction {
	wait := fs.Duration("wait", -1, "delete the key after this Go `duration` (at least the server's key_deletion_min_wait; 0: at once, where the server allows it) instead of the server's default")
	return func(ctx context.Context, c *client.Client, name string) (keysResult, error) {
		k, err := c.ScheduleKeyDeletion(ctx, name, *wait)
		if err != nil {
			return keysResult{}, err
		}
		if k == nil { // deleted at once: the service answers with no body
			return keysResult{text: func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "deleted key %s\n", name)
				return err
			}}, nil
		}
		return keyResult(k, nil)
	}
}

// keysVersionAction returns the action of a subcommand on one version,
// which --version names.
func keysVersionAction(call func(*client.Client, context.Context, string, uint32) (*api.Key, error)) func(*flag.FlagSet) keysAction {
	return func(fs *flag.FlagSet) keysAction {
		v := fs.Uint("version", 0, "the `N` of the version")
		return func(ctx context.Context, c *client.Client, name string) (keysResult, error) {
			if *v == 0 || *v > math.MaxUint32 {
				return keysResult{}, usageError("name the version with --version N")
			}
			return keyResult(call(c, ctx, name, uint32(*v)))
		}
	}
}

func keysTrim(fs *flag.FlagSet) keysAction {
	minAvail := fs.Uint("min-available-version", 0, "destroy the versions below `N`")
	confirm := fs.String("confirm", "", "the key's `NAME` again, to confirm that the versions are destroyed for good")
	return func(ctx context.Context, c *client.Client, name string) (keysResult, error) {
		switch {
		case *minAvail == 0 || *minAvail > math.MaxUint32:
			return keysResult{}, usageError("name the lowest version to keep with --min-available-version N")
		case *confirm != name:
			return keysResult{}, usageError("the versions are destroyed for good: repeat the key's name with --confirm " + name)
		}
		return keyResult(c.TrimKey(ctx, name, uint32(*minAvail)))
	}
}

func keysCancel(ctx context.Context, c *client.Client, name string) (keysResult, error) {
	return keyResult(c.CancelKeyDeletion(ctx, name))
}

// maxBackupFile bounds what restore reads: a backup holds about 100
// bytes a version.
const maxBackupFile = 64 << 20

func keysBackup(fs *flag.FlagSet) keysAction {
	out := fs.String("o", "", "write the backup to `FILE`, which must not exist (created 0600); none or -: standard output, if it is not a terminal")
	under := fs.String("under", "", "what seals the backup: backup_key (the server's backup_key_file) or root (its root key); default: the backup key when the server has one, else root")
	raw := fs.Bool("raw", false, "write the backup's bytes instead of their base64")
	return func(ctx context.Context, c *client.Client, name string) (keysResult, error) {
		switch *under {
		case "", api.SealedUnderBackupKey, api.SealedUnderRoot:
		default:
			return keysResult{}, usageError("--under is backup_key or root")
		}
		toStdout := *out == "" || *out == "-"
		if toStdout && isTerminal(os.Stdout) {
			return keysResult{}, usageError("not writing a key's backup to a terminal: use -o FILE or redirect standard output")
		}
		kb, err := c.BackupKey(ctx, name, *under)
		if err != nil {
			return keysResult{}, err
		}
		data := kb.Backup
		if !*raw {
			data = []byte(base64.StdEncoding.EncodeToString(kb.Backup) + "\n")
			clear(kb.Backup)
		}
		if toStdout {
			return keysResult{text: func(w io.Writer) error {
				_, err := w.Write(data)
				clear(data)
				return err
			}}, nil
		}
		err = writeNewFile(*out, data)
		clear(data)
		if err != nil {
			return keysResult{}, err
		}
		return keysResult{text: func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "wrote the backup of key %s (versions %s, sealed under %s) to %s\n", kb.Key, versionList(kb.Versions), kb.SealedUnder, *out)
			return err
		}}, nil
	}
}

// writeNewFile writes data to a new file at path, mode 0600: a backup
// never replaces a file, nor lands in one others may read.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

func versionList(vs []uint32) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.FormatUint(uint64(v), 10)
	}
	return strings.Join(s, ", ")
}

func keysRestore(fs *flag.FlagSet) keysAction {
	in := fs.String("i", "-", "read the backup, raw or base64, from `FILE` (-: standard input)")
	newName := fs.String("name", "", "restore the key under `NAME` instead of the name the backup holds")
	return func(ctx context.Context, c *client.Client, _ string) (keysResult, error) {
		var r io.Reader = stdin
		if *in != "-" {
			f, err := os.Open(*in)
			if err != nil {
				return keysResult{}, err
			}
			defer f.Close()
			r = f
		}
		b, err := io.ReadAll(io.LimitReader(r, maxBackupFile+1))
		defer clear(b)
		if err != nil {
			return keysResult{}, err
		}
		if len(b) > maxBackupFile {
			return keysResult{}, usageError(fmt.Sprintf("-i %s: larger than a key backup can be", *in))
		}
		backup := b
		if _, err := api.BackupKeyName(b); err != nil {
			// Not the bytes: their base64, as backup writes it.
			if backup, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(b))); err != nil {
				return keysResult{}, usageError(fmt.Sprintf("-i %s: not a key backup, raw or in base64", *in))
			}
			defer clear(backup)
		}
		return keyResult(c.RestoreKey(ctx, backup, *newName))
	}
}

// keyResult is the result of a subcommand that answers with a key.
func keyResult(k *api.Key, err error) (keysResult, error) {
	if err != nil {
		return keysResult{}, err
	}
	return keysResult{json: k, text: func(w io.Writer) error { return printKey(w, k) }}, nil
}

// keyConfigFlags adds a flag for each field of api.KeyConfig, named as
// its JSON field with dashes, that sets it in cfg.
func keyConfigFlags(fs *flag.FlagSet, cfg *api.KeyConfig) {
	fs.StringVar(&cfg.AEAD, "aead", "", "pin the `AEAD` for new data: aes-128-gcm, aes-256-gcm or chacha20-poly1305 (within --allowed-aeads); empty: the replica's fastest")
	fs.Func("allowed-aeads", "the `AEADs` new data may use, separated by commas; empty: any", func(v string) error {
		cfg.AllowedAEADs = nil
		if v == "" {
			return nil
		}
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name == "" {
				return errors.New("an empty AEAD name")
			}
			cfg.AllowedAEADs = append(cfg.AllowedAEADs, name)
		}
		return nil
	})
	fs.Func("rotation-period", "rotate the key once its latest version is this old, a Go `duration` such as 720h (at least the server's min_rotation_period); empty or 0: never", func(v string) error {
		if v != "" {
			if d, err := time.ParseDuration(v); err != nil || d < 0 {
				return errors.New("a Go duration such as 720h")
			}
		}
		cfg.RotationPeriod = v
		return nil
	})
	fs.Func("min-decryption-version", "retire the versions below `N`: their ciphertexts no longer decrypt; 0: none", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return errors.New("a version number")
		}
		cfg.MinDecryptionVersion = uint32(n)
		return nil
	})
	fs.BoolVar(&cfg.DeletionAllowed, "deletion-allowed", false, "allow 'cipherd keys delete' (--deletion-allowed=false forbids it again)")
	fs.BoolVar(&cfg.Exportable, "exportable", false, "allow 'cipherd keys backup', with the material: set only at creation; --exportable=false forbids it for good")
}

// keyConfigPatch returns the merge patch of the settings whose flags were
// given, each to its value in cfg or, for an empty one, to its default,
// and how many it sets.
func keyConfigPatch(fs *flag.FlagSet, cfg api.KeyConfig) (api.KeyConfigPatch, int) {
	all := api.ReplaceKeyConfig(cfg)
	var p api.KeyConfigPatch
	n := 0
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "aead":
			p.AEAD = all.AEAD
		case "allowed-aeads":
			p.AllowedAEADs = all.AllowedAEADs
		case "rotation-period":
			p.RotationPeriod = all.RotationPeriod
		case "min-decryption-version":
			p.MinDecryptionVersion = all.MinDecryptionVersion
		case "deletion-allowed":
			p.DeletionAllowed = all.DeletionAllowed
		case "exportable":
			p.Exportable = all.Exportable
		default:
			return
		}
		n++
	})
	return p, n
}

// readMaterial reads a version's 32 bytes from a file (or standard input
// for "-"): the bytes themselves, or their standard base64 as
// 'head -c 32 /dev/urandom | base64' writes it. A file that holds neither
// is a usage error, whose message never repeats what the file holds.
func readMaterial(path string) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 1<<10))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if len(b) == 32 {
		return b, nil
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	clear(b)
	if err != nil || len(key) != 32 {
		clear(key)
		return nil, usageError(fmt.Sprintf("--import %s: want 32 bytes of key material, raw or in standard base64", path))
	}
	return key, nil
}

// printKeyTable writes keys as a table, a line each.
func printKeyTable(w io.Writer, keys []api.Key) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSIONS\tLATEST\tMIN-DECRYPT\tAEAD\tROTATION\tCREATED")
	for _, k := range keys {
		minDec := "-"
		if k.MinDecryptionVersion > 0 {
			minDec = strconv.FormatUint(uint64(k.MinDecryptionVersion), 10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", k.Name, len(k.Versions), k.LatestVersion, minDec,
			orDefault(k.AEAD, "auto"), orDefault(k.RotationPeriod, "never"), k.Created.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// printKey writes a key's settings, then its versions.
func printKey(w io.Writer, k *api.Key) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "name:\t%s\n", k.Name)
	fmt.Fprintf(tw, "created:\t%s\n", k.Created.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "latest version:\t%d\n", k.LatestVersion)
	if k.MinDecryptionVersion > 0 {
		fmt.Fprintf(tw, "min decryption version:\t%d (the versions below it are retired)\n", k.MinDecryptionVersion)
	} else {
		fmt.Fprintf(tw, "min decryption version:\tnone (every version decrypts)\n")
	}
	fmt.Fprintf(tw, "aead:\t%s\n", orDefault(k.AEAD, "auto (each replica's fastest)"))
	fmt.Fprintf(tw, "allowed aeads:\t%s\n", orDefault(strings.Join(k.AllowedAEADs, ", "), "any"))
	rotation := "never"
	if d, err := time.ParseDuration(k.RotationPeriod); err == nil && d > 0 {
		rotation = k.RotationPeriod
		for _, v := range k.Versions {
			if v.Version == k.LatestVersion {
				rotation += ", next after " + v.Created.Add(d).UTC().Format(time.RFC3339)
			}
		}
	}
	fmt.Fprintf(tw, "rotation period:\t%s\n", rotation)
	fmt.Fprintf(tw, "deletion allowed:\t%s\n", map[bool]string{false: "no", true: "yes"}[k.DeletionAllowed])
	fmt.Fprintf(tw, "exportable:\t%s\n", map[bool]string{false: "no", true: "yes (cipherd keys backup)"}[k.Exportable])
	if d := k.Deletion; d != nil {
		fmt.Fprintf(tw, "deletion:\tscheduled at %s, deleted at %s unless cancelled ('cipherd keys cancel %s')\n",
			d.Scheduled.UTC().Format(time.RFC3339), d.DeleteAt.UTC().Format(time.RFC3339), k.Name)
	}
	if k.MinAvailableVersion > 1 {
		fmt.Fprintf(tw, "min available version:\t%d (the versions below it were destroyed)\n", k.MinAvailableVersion)
	}
	fmt.Fprintln(tw)
	usage := map[uint32]api.KeyVersionUsage{}
	for _, u := range k.Usage {
		usage[u.Version] = u
	}
	fmt.Fprintln(tw, "VERSION\tCREATED\tSTATE\tSEALED\tOPENED\tLAST USED")
	for _, v := range k.Versions {
		state := "decrypts"
		switch {
		case slices.Contains(k.DisabledVersions, v.Version):
			state = "disabled"
		case v.Version == k.LatestVersion:
			state = "latest: seals new data"
		case v.Version < k.MinDecryptionVersion:
			state = "retired"
		}
		sealed, opened, last := "-", "-", "-"
		if u, ok := usage[v.Version]; ok {
			sealed, opened = strconv.FormatUint(u.Sealed, 10), strconv.FormatUint(u.Opened, 10)
			if u.LastUsed != nil {
				last = u.LastUsed.UTC().Format(time.RFC3339)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", v.Version, v.Created.UTC().Format(time.RFC3339), state, sealed, opened, last)
	}
	return tw.Flush()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
