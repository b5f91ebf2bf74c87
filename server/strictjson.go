package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cipherd/cipherd/api"
)

// strictJSON checks what encoding/json lets through and the documented JSON
// refuses, for a body that is about to be decoded into a value of type t:
// an object's field names must be the exact names of t's fields
// (encoding/json matches them without regard to case), each at most once
// (encoding/json keeps the last), base64 fields ([]byte) must be strings
// (encoding/json also takes an array of numbers) of RFC 4648 §4 with
// canonical padding and no line breaks (encoding/json's decoder skips CR
// and LF), and the body must be valid UTF-8 (encoding/json replaces bad
// bytes with U+FFFD). The top level must be an object. Unknown fields,
// wrong types and syntax are left to encoding/json, whose errors are worded
// by jsonErrorText.
func strictJSON(b []byte, t reflect.Type) error {
	if !utf8.Valid(b) {
		return jsonError("the body is not valid UTF-8")
	}
	if i := skipSpace(b, 0); i >= len(b) || b[i] != '{' {
		return jsonError("the body must be an object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	err := walkJSON(dec, t, 0)
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae
	}
	return nil // a syntax error: encoding/json words it
}

// walkJSON reads one value from dec, checking it against type t.
func walkJSON(dec *json.Decoder, t reflect.Type, depth int) error {
	if depth > maxJSONDepth {
		return jsonError("nested too deeply")
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch {
		case tok == '{' && t.Kind() == reflect.Struct:
			fields := strictFields(t)
			seen := make(map[string]bool, len(fields))
			for dec.More() {
				nt, err := dec.Token()
				if err != nil {
					return err
				}
				name, _ := nt.(string)
				ft, known := fields[name]
				if !known {
					// The name is request data: it is not repeated.
					return jsonError("unknown field")
				}
				if seen[name] {
					return jsonError(strconv.Quote(name) + " given twice")
				}
				seen[name] = true
				if err := walkJSON(dec, ft, depth+1); err != nil {
					return err
				}
			}
		case tok == '[' && isBase64Field(t):
			// encoding/json fills a []byte from an array of numbers too; the
			// documented JSON has base64 strings only.
			return apiError(api.CodeBadRequest, "invalid JSON: a base64 field must be a string")
		case tok == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8:
			for dec.More() {
				if err := walkJSON(dec, t.Elem(), depth+1); err != nil {
					return err
				}
			}
		default: // a type encoding/json refuses, or a value of no known shape
			for dec.More() {
				if tok == '{' {
					if _, err := dec.Token(); err != nil {
						return err
					}
				}
				if err := walkJSON(dec, reflect.TypeFor[any](), depth+1); err != nil {
					return err
				}
			}
		}
		_, err := dec.Token() // the closing delimiter
		return err
	case string:
		if isBase64Field(t) {
			scratch := []byte(nil)
			if _, ok := decodeStrictBase64([]byte(tok), &scratch); !ok {
				return apiError(api.CodeBadRequest, "invalid JSON: bad base64 in a field (standard base64 with padding, RFC 4648 §4, no line breaks)")
			}
		}
	}
	return nil
}

// isBase64Field reports whether encoding/json reads a value of type t as a
// base64 field: a []byte, and no other slice or array of bytes.
func isBase64Field(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
}

var strictFieldCache sync.Map // reflect.Type → map[string]reflect.Type

// strictFields returns the JSON names of struct type t's fields (those of
// embedded structs included, as encoding/json flattens them) and their types.
func strictFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := strictFieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			continue // its fields are listed on their own
		}
		if !f.IsExported() || len(f.Index) > 1 && !embeddedVisible(t, f.Index) {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	strictFieldCache.Store(t, m)
	return m
}

// embeddedVisible reports whether the field at index is reached through
// untagged embedded structs only, as encoding/json requires to flatten it.
func embeddedVisible(t reflect.Type, index []int) bool {
	for _, i := range index[:len(index)-1] {
		f := t.Field(i)
		if !f.Anonymous || f.Tag.Get("json") != "" {
			return false
		}
		t = f.Type
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	return true
}
