package server

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cipherd/cipherd/api"
)

// The JSON bodies of the data routes (encrypt, decrypt, rewrap) are decoded
// by hand rather than by encoding/json, for two reasons:
//
//   - strictness: field names match exactly (encoding/json matches them
//     without regard to case), a field given twice is refused (encoding/json
//     keeps the last), base64 is RFC 4648 §4 with canonical padding and no
//     line breaks (encoding/json's decoder skips CR and LF), and a body that
//     is not valid UTF-8 is refused;
//   - batches: an item that is valid JSON but wrong (bad base64, an unknown
//     field, a wrong type) fails alone, in its place, while the others go on;
//     only a body that is not JSON, or a wrong top level, refuses the batch.
//
// It is also the fast path: one pass, the base64 decoded into one buffer,
// no reflection (BenchmarkHandleEncryptBatch). FuzzDecodeDataRequest holds it
// to encoding/json with strictJSON's checks: both accept the same bodies and
// yield the same items.

// dataItem is one decoded item: its fields, or why it is refused.
type dataItem struct {
	data      []byte // the plaintext or ciphertext; nil when absent or null
	context   []byte // nil when absent or null
	reference string
	err       *api.Error // the item is refused; the fields may be partial
}

// dataRequest is a decoded body: one item, or a batch.
type dataRequest struct {
	single   dataItem
	topLevel bool       // a top-level field other than items has a value
	items    []dataItem // the batch; nil for a single item
}

// maxJSONDepth bounds the nesting of values the decoder skips (values of
// wrongly typed fields): deeper bodies are refused.
const maxJSONDepth = 64

// jsonError is a body that is not acceptable as a whole.
func jsonError(msg string) *api.Error { return apiError(api.CodeBadRequest, "invalid JSON: "+msg) }

// tooManyItems is the refusal of a batch over its route's item limit.
func tooManyItems(limit int) *api.Error {
	return apiError(api.CodeTooLarge, "a batch takes at most "+strconv.Itoa(limit)+" items")
}

func syntaxError(i int) *api.Error {
	return jsonError("syntax error at offset " + strconv.Itoa(i))
}

// decodeDataRequest decodes the body b of a data route whose data field is
// dataField ("plaintext" or "ciphertext"). Decoded base64 goes into scratch
// while it has room, so the items may alias scratch (never b or each other).
// A batch of more than maxItems items is refused (413) at its item
// maxItems+1, before that item is decoded, so that the items held never
// outgrow the limit however many the body carries.
func decodeDataRequest(b []byte, dataField string, scratch []byte, maxItems int) (dataRequest, *api.Error) {
	var req dataRequest
	if !utf8.Valid(b) {
		return req, jsonError("the body is not valid UTF-8")
	}
	d := itemDecoder{b: b, dataField: dataField, scratch: scratch, maxItems: maxItems}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return req, jsonError("the body must be an object")
	}
	seen := 0
	i, err := d.object(i, func(name []byte, i int) (int, *api.Error) {
		if string(name) != "items" {
			return d.field(&req.single, name, i, &seen)
		}
		if seen&seenItems != 0 {
			return 0, jsonError(`duplicate field "items"`)
		}
		seen |= seenItems
		return d.items(i, &req)
	})
	if err != nil {
		return dataRequest{}, err
	}
	if req.single.err != nil {
		return dataRequest{}, req.single.err
	}
	// A top-level null is no field, as for encoding/json (the Go client
	// sends "plaintext":null beside items).
	req.topLevel = req.single.data != nil || req.single.context != nil || req.single.reference != ""
	if skipSpace(b, i) != len(b) {
		return dataRequest{}, jsonError("data after the value")
	}
	return req, nil
}

const (
	seenData = 1 << iota
	seenContext
	seenReference
	seenItems
)

type itemDecoder struct {
	b         []byte
	dataField string
	scratch   []byte
	maxItems  int
}

// object parses the object at b[i] ('{'), calling member for each member
// with its name and the index of its value; member returns the index after
// the value. It returns the index after the object.
func (d *itemDecoder) object(i int, member func(name []byte, i int) (int, *api.Error)) (int, *api.Error) {
	b := d.b
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		name, j, err := d.str(i)
		if err != nil {
			return 0, err
		}
		j = skipSpace(b, j)
		if j >= len(b) || b[j] != ':' {
			return 0, syntaxError(j)
		}
		if j, err = member(name, skipSpace(b, j+1)); err != nil {
			return 0, err
		}
		j = skipSpace(b, j)
		if j >= len(b) {
			return 0, jsonError("unexpected end of input")
		}
		switch b[j] {
		case ',':
			i = skipSpace(b, j+1)
		case '}':
			return j + 1, nil
		default:
			return 0, syntaxError(j)
		}
	}
}

// field decodes the value at b[i] of the item field name into it. A field
// that is wrong but well-formed sets it.err (the first such error) and is
// skipped; only malformed JSON is returned as an error.
func (d *itemDecoder) field(it *dataItem, name []byte, i int, seen *int) (int, *api.Error) {
	var bit int
	switch string(name) {
	case d.dataField:
		bit = seenData
	case "context":
		bit = seenContext
	case "reference":
		bit = seenReference
	default:
		// The name is request data: it is not repeated.
		return d.skipFailed(it, i, jsonError("unknown field"))
	}
	if *seen&bit != 0 {
		return d.skipFailed(it, i, jsonError(strconv.Quote(string(name))+" given twice"))
	}
	*seen |= bit
	b := d.b
	if i < len(b) && b[i] == 'n' {
		return d.literal(i, "null")
	}
	if i >= len(b) || b[i] != '"' {
		kind := "a base64 string"
		if bit == seenReference {
			kind = "a string"
		}
		return d.skipFailed(it, i, jsonError(strconv.Quote(string(name))+" must be "+kind))
	}
	s, j, err := d.str(i)
	if err != nil {
		return 0, err
	}
	if bit == seenReference {
		it.reference = string(s)
		return j, nil
	}
	v, ok := decodeStrictBase64(s, &d.scratch)
	if !ok {
		if it.err == nil {
			it.err = apiError(api.CodeBadRequest, "bad base64 in "+strconv.Quote(string(name))+" (standard base64 with padding, RFC 4648 §4, no line breaks)")
		}
		return j, nil
	}
	if bit == seenData {
		it.data = v
	} else {
		it.context = v
	}
	return j, nil
}

// skipFailed records err as the item's error, unless it has one, and skips
// the value at b[i].
func (d *itemDecoder) skipFailed(it *dataItem, i int, err *api.Error) (int, *api.Error) {
	if it.err == nil {
		it.err = err
	}
	return d.skip(i, 0)
}

// items decodes the batch array at b[i] into req.items.
func (d *itemDecoder) items(i int, req *dataRequest) (int, *api.Error) {
	b := d.b
	if i < len(b) && b[i] == 'n' {
		return d.literal(i, "null") // as encoding/json: no batch
	}
	if i >= len(b) || b[i] != '[' {
		if i >= len(b) || b[i] == ']' || b[i] == '}' || b[i] == ',' {
			return 0, syntaxError(i)
		}
		if _, err := d.skip(i, 0); err != nil {
			return 0, err
		}
		return 0, jsonError(`"items" must be an array`)
	}
	// Room for as many items as there are objects left in the body, within
	// the limit: one allocation rather than a growing slice.
	req.items = make([]dataItem, 0, min(bytes.Count(b[i:], []byte{'{'}), d.maxItems))
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		if len(req.items) == d.maxItems {
			return 0, tooManyItems(d.maxItems)
		}
		var it dataItem
		var err *api.Error
		switch {
		case i < len(b) && b[i] == '{':
			seen := 0
			i, err = d.object(i, func(name []byte, j int) (int, *api.Error) { return d.field(&it, name, j, &seen) })
		case i < len(b) && b[i] == 'n':
			i, err = d.literal(i, "null") // as encoding/json: an empty item
		default:
			i, err = d.skipFailed(&it, i, jsonError("an item must be an object"))
		}
		if err != nil {
			return 0, err
		}
		if it.err != nil {
			it = dataItem{reference: it.reference, err: it.err}
		}
		req.items = append(req.items, it)
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, jsonError("unexpected end of input")
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return 0, syntaxError(i)
		}
	}
}

// literal checks the literal lit at b[i].
func (d *itemDecoder) literal(i int, lit string) (int, *api.Error) {
	if !bytes.HasPrefix(d.b[i:], []byte(lit)) {
		return 0, syntaxError(i)
	}
	return i + len(lit), nil
}

// skip checks the JSON value at b[i] and returns the index after it.
func (d *itemDecoder) skip(i, depth int) (int, *api.Error) {
	b := d.b
	if i >= len(b) {
		return 0, jsonError("unexpected end of input")
	}
	switch ch := b[i]; {
	case ch == '"':
		_, j, err := d.str(i)
		return j, err
	case ch == '{' || ch == '[':
		if depth >= maxJSONDepth {
			return 0, jsonError("nested too deeply")
		}
		end := byte('}')
		if ch == '[' {
			end = ']'
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == end {
			return i + 1, nil
		}
		for {
			if ch == '{' {
				_, j, err := d.str(i)
				if err != nil {
					return 0, err
				}
				j = skipSpace(b, j)
				if j >= len(b) || b[j] != ':' {
					return 0, syntaxError(j)
				}
				i = skipSpace(b, j+1)
			}
			j, err := d.skip(i, depth+1)
			if err != nil {
				return 0, err
			}
			j = skipSpace(b, j)
			switch {
			case j >= len(b):
				return 0, jsonError("unexpected end of input")
			case b[j] == ',':
				i = skipSpace(b, j+1)
			case b[j] == end:
				return j + 1, nil
			default:
				return 0, syntaxError(j)
			}
		}
	case ch == 't':
		return d.literal(i, "true")
	case ch == 'f':
		return d.literal(i, "false")
	case ch == 'n':
		return d.literal(i, "null")
	case ch == '-' || '0' <= ch && ch <= '9':
		return d.number(i)
	}
	return 0, syntaxError(i)
}

// number checks the JSON number at b[i] (RFC 8259 §6).
func (d *itemDecoder) number(i int) (int, *api.Error) {
	b := d.b
	digits := func(i int) int {
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i
	}
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(i)
	default:
		return 0, syntaxError(i)
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, syntaxError(j)
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, syntaxError(j)
		}
		i = j
	}
	if i == start {
		return 0, syntaxError(i)
	}
	return i, nil
}

// str reads the JSON string at b[i] and returns its contents and the index
// after it. Without escapes the contents are a slice of b; with escapes, a
// new slice, unescaped as encoding/json does (an invalid surrogate becomes
// U+FFFD). The body is valid UTF-8 (checked first).
func (d *itemDecoder) str(i int) ([]byte, int, *api.Error) {
	b := d.b
	if i >= len(b) || b[i] != '"' {
		return nil, 0, syntaxError(i)
	}
	j := i + 1
	for ; j < len(b); j++ {
		switch ch := b[j]; {
		case ch == '"':
			return b[i+1 : j], j + 1, nil
		case ch == '\\':
			return d.unescape(i, j)
		case ch < 0x20:
			return nil, 0, syntaxError(j)
		}
	}
	return nil, 0, jsonError("unexpected end of input")
}

// unescape is str for a string with an escape at b[j].
func (d *itemDecoder) unescape(i, j int) ([]byte, int, *api.Error) {
	b := d.b
	out := append([]byte(nil), b[i+1:j]...)
	for j < len(b) {
		ch := b[j]
		switch {
		case ch == '"':
			return out, j + 1, nil
		case ch < 0x20:
			return nil, 0, syntaxError(j)
		case ch != '\\':
			out = append(out, ch)
			j++
			continue
		}
		if j+1 >= len(b) {
			break
		}
		switch e := b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(b, j+2)
			if !ok {
				return nil, 0, syntaxError(j)
			}
			j += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if j+1 < len(b) && b[j] == '\\' && b[j+1] == 'u' {
					r2, ok = hex4(b, j+2)
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					j += 6
					r = dec
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, 0, syntaxError(j)
		}
		j += 2
	}
	return nil, 0, jsonError("unexpected end of input")
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, ch := range b[i : i+4] {
		switch {
		case '0' <= ch && ch <= '9':
			ch -= '0'
		case 'a' <= ch && ch <= 'f':
			ch -= 'a' - 10
		case 'A' <= ch && ch <= 'F':
			ch -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(ch)
	}
	return r, true
}

// strictBase64 is RFC 4648 §4 base64 with padding, canonical padding bits.
// It still skips CR and LF, which decodeStrictBase64 refuses first.
var strictBase64 = base64.StdEncoding.Strict()

// decodeStrictBase64 decodes s into the front of *scratch, which it then
// advances, or into a new slice when *scratch is too short. The result is
// never nil. It refuses line breaks, which encoding/base64 skips.
func decodeStrictBase64(s []byte, scratch *[]byte) ([]byte, bool) {
	if bytes.IndexByte(s, '\r') >= 0 || bytes.IndexByte(s, '\n') >= 0 {
		return nil, false
	}
	if len(s) == 0 {
		return []byte{}, true
	}
	var out []byte
	if n := strictBase64.DecodedLen(len(s)); n <= len(*scratch) {
		out, *scratch = (*scratch)[:n:n], (*scratch)[n:]
	} else {
		out = make([]byte, n)
	}
	n, err := strictBase64.Decode(out, s)
	return out[:n], err == nil
}
