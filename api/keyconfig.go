package api

import (
	"bytes"
	"encoding/json"
)

// KeyConfigPatch is the body of PUT /v1/keys/{key}/config, a JSON merge
// patch (RFC 7396) of the key's KeyConfig: a field left out keeps its
// value, a field set to null returns to its default (the zero value), and
// a field with a value takes it. {} changes nothing.
type KeyConfigPatch struct {
	MinDecryptionVersion Optional[uint32]   `json:"min_decryption_version,omitzero"`
	AllowedAEADs         Optional[[]string] `json:"allowed_aeads,omitzero"`
	AEAD                 Optional[string]   `json:"aead,omitzero"`
	DeletionAllowed      Optional[bool]     `json:"deletion_allowed,omitzero"`
	RotationPeriod       Optional[string]   `json:"rotation_period,omitzero"` // e.g. "720h"
	Exportable           Optional[bool]     `json:"exportable,omitzero"`      // true only on a key that has it
}

// ReplaceKeyConfig returns the patch that gives a key exactly cfg: every
// field set, the zero ones to null.
func ReplaceKeyConfig(cfg KeyConfig) KeyConfigPatch {
	return KeyConfigPatch{
		MinDecryptionVersion: valueOrNull(cfg.MinDecryptionVersion, cfg.MinDecryptionVersion == 0),
		AllowedAEADs:         valueOrNull(cfg.AllowedAEADs, len(cfg.AllowedAEADs) == 0),
		AEAD:                 valueOrNull(cfg.AEAD, cfg.AEAD == ""),
		DeletionAllowed:      valueOrNull(cfg.DeletionAllowed, !cfg.DeletionAllowed),
		RotationPeriod:       valueOrNull(cfg.RotationPeriod, cfg.RotationPeriod == ""),
		Exportable:           valueOrNull(cfg.Exportable, !cfg.Exportable),
	}
}

func valueOrNull[T any](v T, null bool) Optional[T] {
	if null {
		return Null[T]()
	}
	return Some(v)
}

// Apply returns cfg with the patch applied.
func (p KeyConfigPatch) Apply(cfg KeyConfig) KeyConfig {
	p.MinDecryptionVersion.apply(&cfg.MinDecryptionVersion)
	p.AllowedAEADs.apply(&cfg.AllowedAEADs)
	p.AEAD.apply(&cfg.AEAD)
	p.DeletionAllowed.apply(&cfg.DeletionAllowed)
	p.RotationPeriod.apply(&cfg.RotationPeriod)
	p.Exportable.apply(&cfg.Exportable)
	return cfg
}

// Optional is one field of a JSON merge patch: absent (the zero value),
// null, or a value.
type Optional[T any] struct {
	Set   bool // the field is present, as null or a value
	Null  bool // the field is null
	Value T    // the value, when Set and not Null
}

// Some returns a field set to v.
func Some[T any](v T) Optional[T] { return Optional[T]{Set: true, Value: v} }

// Null returns a field set to null.
func Null[T any]() Optional[T] { return Optional[T]{Set: true, Null: true} }

// IsZero reports whether the field is absent (omitzero leaves it out).
func (o Optional[T]) IsZero() bool { return !o.Set }

// MarshalJSON encodes the value, or null.
func (o Optional[T]) MarshalJSON() ([]byte, error) {
	if !o.Set || o.Null {
		return []byte("null"), nil
	}
	return json.Marshal(o.Value)
}

// UnmarshalJSON decodes null or a value; it is called only for a field
// that is present.
func (o *Optional[T]) UnmarshalJSON(b []byte) error {
	*o = Optional[T]{Set: true}
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.Value)
}

func (o Optional[T]) apply(dst *T) {
	switch {
	case !o.Set:
	case o.Null:
		var zero T
		*dst = zero
	default:
		*dst = o.Value
	}
}
