package cryptosvc

import (
	"fmt"
	"io"
	"os"
)

// EnvBackupKeyFile names the file of the backup key (Config.BackupKey) for
// cipherd serve, as its backup_key_file setting does.
const EnvBackupKeyFile = "CIPHERD_BACKUP_KEY_FILE"

// LoadBackupKey reads a backup key from file: 32 bytes as they are, or
// as text in the root key's forms (ParseRootKey: base64 or hex, white
// space around ignored). A key of 32 zero bytes is refused. Errors name
// the file, never what it holds.
func LoadBackupKey(file string) (Secret, error) {
	f, err := os.Open(file)
	if err != nil {
		return Secret{}, fmt.Errorf("%w: backup key: %v", ErrInvalidConfig, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, rkMaxFileSize+1))
	f.Close()
	defer clear(b)
	switch {
	case err != nil:
		return Secret{}, fmt.Errorf("%w: backup key file %s: %v", ErrInvalidConfig, file, err)
	case len(b) > rkMaxFileSize:
		return Secret{}, fmt.Errorf("%w: backup key file %s is larger than %d bytes", ErrInvalidConfig, file, rkMaxFileSize)
	}
	var sec Secret
	if len(b) == SecretSize && !bkIsText(b) {
		sec, _ = NewSecret(b)
	} else if sec, err = rkParse(b); err != nil {
		return Secret{}, fmt.Errorf("%w: backup key file %s: want 32 bytes, raw or as base64 or hex", ErrInvalidConfig, file)
	}
	var zero Secret
	if sec.Equal(&zero) {
		return Secret{}, fmt.Errorf("%w: backup key file %s: the key is all zeros", ErrInvalidConfig, file)
	}
	return sec, nil
}

// bkIsText reports whether b is all printable ASCII: a file of 32 such
// bytes is someone's text, not a key (a random key is printable with
// probability (95/256)^32, about 2^-46), and no text form of a key is 32
// characters long, so it is refused rather than used as a weak key.
func bkIsText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
