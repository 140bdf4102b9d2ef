package schema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The status patches are written straight from their dotted paths, without the tree of maps
// that json.Marshal would need: a status patch is written for nearly every VM in a burst, and
// building that tree and encoding it by reflection was the largest share of the controller's
// own allocations (the figures, before and after: docs/dev/benchmarks.md, "Status patches
// written from their paths"). The bytes are json.Marshal's for the same tree (keys sorted at
// each level, strings escaped as it escapes them), which the tests check against it.

// mergePatch writes the JSON merge patch that sets each of values' paths to its value (nil is
// null, which removes the field). Empty paths are left out. Two paths that collide (the
// same, or one inside the other) are a field map's error, reported rather than written.
func mergePatch(values []pathValue) ([]byte, error) {
	values = slices.DeleteFunc(values, func(e pathValue) bool { return e.path == "" })
	slices.SortFunc(values, func(a, b pathValue) int { return comparePaths(a.path, b.path) })
	b := make([]byte, 0, 512)
	b = append(b, '{')
	// open holds the objects written and not yet closed, as their paths' segments.
	open := make([]string, 0, 8)
	comma := false
	for i, e := range values {
		if i > 0 {
			prev := values[i-1].path
			if prev == e.path {
				return nil, fmt.Errorf("status path %q is given twice", e.path)
			}
			if inside(e.path, prev) {
				return nil, fmt.Errorf("status path %q crosses another status field", e.path)
			}
		}
		// The objects this path shares with the one before stay open; the rest close.
		rest := e.path
		shared := 0
		for shared < len(open) {
			seg, after, found := cutDot(rest)
			if !found || seg != open[shared] {
				break
			}
			rest = after
			shared++
		}
		for ; len(open) > shared; open = open[:len(open)-1] {
			b = append(b, '}')
			comma = true
		}
		for {
			seg, after, found := cutDot(rest)
			if comma {
				b = append(b, ',')
			}
			b = appendString(b, seg)
			b = append(b, ':')
			if !found {
				break
			}
			b = append(b, '{')
			open = append(open, seg)
			comma = false
			rest = after
		}
		var err error
		if b, err = appendValue(b, e.v); err != nil {
			return nil, fmt.Errorf("status path %q: %w", e.path, err)
		}
		comma = true
	}
	for range open {
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// comparePaths orders dotted paths as json.Marshal orders a tree of maps: segment by segment,
// bytewise, a path before those inside it. (Whole strings compared bytewise would put
// "a-b" before "a.c", which json.Marshal writes after it.)
func comparePaths(a, b string) int {
	for {
		sa, ra, fa := cutDot(a)
		sb, rb, fb := cutDot(b)
		if c := strings.Compare(sa, sb); c != 0 {
			return c
		}
		switch {
		case !fa && !fb:
			return 0
		case !fa:
			return -1
		case !fb:
			return 1
		}
		a, b = ra, rb
	}
}

// cutDot is strings.Cut(s, ".") for the one separator, small enough to be inlined where
// strings.Cut's call is not: a patch cuts every path into its segments several times (sorting,
// then writing), and that call showed in its profile.
func cutDot(s string) (before, after string, found bool) {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// inside reports whether path is a field inside parent's value (strings.HasPrefix(path,
// parent+".") without making that string).
func inside(path, parent string) bool {
	return len(path) > len(parent) && path[len(parent)] == '.' && strings.HasPrefix(path, parent)
}

// appendValue writes v as json.Marshal would.
func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case []Condition:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, c := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCondition(b, c)
		}
		return append(b, ']'), nil
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return append(b, raw...), nil
	}
}

// appendCondition writes a condition as the API stores it: RFC 3339 seconds,
// observedGeneration left out when zero; its keys in json.Marshal's order for a map.
func appendCondition(b []byte, c Condition) []byte {
	b = append(b, `{"lastTransitionTime":"`...)
	b = c.LastTransitionTime.UTC().AppendFormat(b, time.RFC3339)
	b = append(b, `","message":`...)
	b = appendString(b, c.Message)
	if c.ObservedGeneration != 0 {
		b = append(b, `,"observedGeneration":`...)
		b = strconv.AppendInt(b, c.ObservedGeneration, 10)
	}
	b = append(b, `,"reason":`...)
	b = appendString(b, c.Reason)
	b = append(b, `,"status":`...)
	b = appendString(b, string(c.Status))
	b = append(b, `,"type":`...)
	b = appendString(b, c.Type)
	return append(b, '}')
}

// appendString writes s as a JSON string as json.Marshal does. The strings of a status are
// plain ASCII almost always, written as they are; any other goes through json.Marshal, for
// its escaping of HTML characters, control characters and invalid UTF-8.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			raw, _ := json.Marshal(s) // a string always encodes
			return append(b, raw...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// groupParents are ownParent of the server's and the disk's fields for one layout, kept for
// the last layout asked about: they are the same for every patch of a layout, and a process
// has one (tests have several, and find them again).
type groupParents struct {
	f            Fields
	server, disk string
}

var lastParents atomic.Pointer[groupParents]

// parentsOf returns the groupParents of f.
func parentsOf(f Fields) *groupParents {
	if p := lastParents.Load(); p != nil && p.f == f {
		return p
	}
	p := &groupParents{f: f, server: ownParent(f, f.serverPaths()), disk: ownParent(f, f.rootDiskPaths())}
	lastParents.Store(p)
	return p
}
