package api

import "errors"

// A key backup's header starts with "CDKB", its format version (1), its
// sealing and a 32-byte salt, then the key's name after a length byte
// (docs/FORMAT.md, Key backups). The header is not secret.
const (
	backupMagic      = "CDKB"
	backupNameOffset = len(backupMagic) + 2 + 32
)

var errNotBackup = errors.New("cipherd: not a key backup of format version 1")

// BackupKeyName returns the name of the key a backup (KeyBackup.Backup)
// holds, read from its header without opening it. It checks the header's
// start only: whether the backup opens, only a restore tells.
func BackupKeyName(backup []byte) (string, error) {
	if len(backup) <= backupNameOffset || string(backup[:len(backupMagic)]) != backupMagic || backup[len(backupMagic)] != 1 {
		return "", errNotBackup
	}
	n := int(backup[backupNameOffset])
	name := backup[backupNameOffset+1:]
	if n == 0 || len(name) < n {
		return "", errNotBackup
	}
	return string(name[:n]), nil
}
