package server

import (
	"bytes"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// routeTable is the route table compiled once, in buildApp. Every place that
// needs to know which row a request is for asks it, with the same function
// on the same bytes: checkHeaders before the body is read, front to run
// the row, the access line and the metrics for the route label, and
// closeIfUnread for whether the row reads a body. A row changed in routes
// changes all of them at once.
type routeTable struct {
	rows []route
	// minJSONBody is the smallest JSON body limit of the rows that take
	// one: checkHeaders lets a JSON body within it through without a match.
	minJSONBody int64
}

// compileTable prepares rows and returns their table.
func compileTable(rows []route) *routeTable {
	t := &routeTable{rows: rows}
	for i := range rows {
		r := &rows[i]
		r.prepare()
		if r.maxBody > 0 && (t.minJSONBody == 0 || r.maxBody < t.minJSONBody) {
			t.minJSONBody = r.maxBody
		}
	}
	return t
}

// requestPath returns the path of a request target: the origin form
// ("/v1/keys?x") without its query, or the path of the absolute form
// ("http://host/v1/keys", which forward proxies send and servers must
// accept, RFC 9112 section 3.2.2); nil for any other form, which no row
// matches.
func requestPath(target []byte) []byte {
	if len(target) > 0 && target[0] != '/' {
		rest, ok := cutSchemeFold(target, "http://")
		if !ok {
			rest, ok = cutSchemeFold(target, "https://")
		}
		if !ok {
			return nil
		}
		i := bytes.IndexAny(rest, "/?#")
		if i < 0 || rest[i] != '/' {
			return []byte("/") // an empty path is "/"
		}
		target = rest[i:]
	}
	if i := bytes.IndexAny(target, "?#"); i >= 0 {
		target = target[:i]
	}
	return target
}

// cutSchemeFold is bytes.CutPrefix for a scheme, which is case-insensitive.
func cutSchemeFold(b []byte, scheme string) ([]byte, bool) {
	if len(b) < len(scheme) || !bytes.EqualFold(b[:len(scheme)], []byte(scheme)) {
		return b, false
	}
	return b[len(scheme):], true
}

// pathArgs are the parameters of a path that matched a row.
type pathArgs struct {
	key   []byte // the :key segment; nil on a row without one
	param []byte // the row's other parameter (a token id, a version); nil on a row without one
}

// match returns the row for method and path (from requestPath), and the
// path's parameters: its :key segment on a keyed row, and its other
// parameter's. Paths match as the routers of Go's web frameworks commonly
// do: literal segments in any case, one trailing slash ignored; a
// parameter is one non-empty segment, kept as sent. Without a row,
// pathKnown reports whether some row has the path with another method
// (405, not 404). HEAD runs a GET row: its answer is the GET's without
// the content (RFC 9110, 9.3.2), which fasthttp leaves out.
func (t *routeTable) match(method, path []byte) (r *route, args pathArgs, pathKnown bool) {
	path, ok := tablePath(path)
	if !ok {
		return nil, pathArgs{}, false
	}
	head := string(method) == fiber.MethodHead
	for i := range t.rows {
		row := &t.rows[i]
		a, ok := row.matchPath(path)
		if !ok {
			continue
		}
		if string(method) == row.method || head && row.method == fiber.MethodGet {
			return row, a, true
		}
		pathKnown = true
	}
	return nil, pathArgs{}, pathKnown
}

// tablePath is path as the rows' segments are matched against it: without
// its leading slash and one trailing slash; false for a path that does
// not start with a slash, which no row has.
func tablePath(path []byte) ([]byte, bool) {
	if len(path) == 0 || path[0] != '/' {
		return nil, false
	}
	return bytes.TrimSuffix(path[1:], []byte("/")), true
}

// allow is the Allow header of a 405 on path: the methods of its rows,
// and HEAD beside GET.
func (t *routeTable) allow(path []byte) string {
	path, ok := tablePath(path)
	if !ok {
		return ""
	}
	var methods []string
	for i := range t.rows {
		row := &t.rows[i]
		if _, ok := row.matchPath(path); ok && !slices.Contains(methods, row.method) {
			methods = append(methods, row.method)
			if row.method == fiber.MethodGet {
				methods = append(methods, fiber.MethodHead)
			}
		}
	}
	slices.Sort(methods)
	return strings.Join(methods, ", ")
}

// matchPath matches path (without its leading and trailing slashes)
// against the row's segments.
func (r *route) matchPath(path []byte) (args pathArgs, ok bool) {
	for j, seg := range r.segments {
		part, rest, more := bytes.Cut(path, []byte("/"))
		last := j == len(r.segments)-1
		switch {
		case last == more:
			return pathArgs{}, false // the path has more segments, or fewer
		case seg == nil:
			if len(part) == 0 {
				return pathArgs{}, false
			}
			if j == r.keySeg {
				args.key = part
			} else {
				args.param = part
			}
		case !bytes.EqualFold(part, seg):
			return pathArgs{}, false
		}
		path = rest
	}
	return args, true
}

// splitPattern returns a row's path pattern as segments: nil for a ":name"
// parameter, which matches any one non-empty segment; and the index of the
// ":key" segment, -1 without one.
func splitPattern(pattern string) (segs [][]byte, keySeg int) {
	keySeg = -1
	for seg := range strings.SplitSeq(strings.Trim(pattern, "/"), "/") {
		if seg == ":key" {
			keySeg = len(segs)
		}
		if strings.HasPrefix(seg, ":") {
			segs = append(segs, nil)
		} else {
			segs = append(segs, []byte(seg))
		}
	}
	return segs, keySeg
}
