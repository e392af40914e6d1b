package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth caps the nesting of a request body's objects and arrays. What a client stores
// comes back inside a response about six levels deep (page → data[] → agent → tools[] →
// input_schema → …), and clients refuse documents deeper than their own limit: Rust's
// serde_json stops at 128, Python's json at its recursion limit (~1,000), the Go SDK at
// 10,000. 64 keeps every stored value plus its envelope under the strictest of them, and is
// still several times deeper than any real JSON Schema or event.
const MaxDepth = 64

// Problems CheckText and CheckString report; the field path goes in front.
const (
	problemNUL  = "must not contain NUL (\\u0000)"
	problemUTF8 = "must be valid UTF-8"
)

// CheckText scans a JSON document once, before it is decoded, for what the decoder would let
// through but PostgreSQL's jsonb and the clients cannot take: a NUL (\u0000) in any string,
// invalid UTF-8 (encoding/json silently turns it into U+FFFD), a lone UTF-16 surrogate
// escape, and nesting deeper than MaxDepth. The error names the JSON path of the first
// offending value ("agent.metadata.k: must not contain NUL (\u0000)"). Malformed JSON passes:
// the decoder reports it with its position.
func CheckText(data []byte) error {
	s := scanner{data: data}
	err := s.value(0)
	if errors.Is(err, errSyntax) {
		return nil
	}
	return err
}

// CheckString reports a NUL or invalid UTF-8 in a string that did not come through a JSON
// body (path ids, query parameters): "field: must not contain NUL (\u0000)".
func CheckString(field, v string) error {
	if p := stringProblem(v); p != "" {
		return fmt.Errorf("%s: %s", field, p)
	}
	return nil
}

func stringProblem(v string) string {
	switch {
	case strings.IndexByte(v, 0) >= 0:
		return problemNUL
	case !utf8.ValidString(v):
		return problemUTF8
	}
	return ""
}

// Excerpt cuts s to a short prefix (on a rune boundary) so that an error message quotes an
// input without echoing all of it.
func Excerpt(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// maxPathSegment bounds how much of an object key a path in an error message repeats.
const maxPathSegment = 64

var errSyntax = errors.New("malformed JSON")

type pathSeg struct {
	key   string
	index int
	isKey bool
}

type scanner struct {
	data []byte
	pos  int
	path []pathSeg
}

func (s *scanner) fail(problem string) error {
	var b strings.Builder
	for _, seg := range s.path {
		if !seg.isKey {
			b.WriteString("[" + strconv.Itoa(seg.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(Excerpt(seg.key, maxPathSegment))
	}
	if b.Len() == 0 {
		b.WriteString("request body")
	}
	return errors.New(b.String() + ": " + problem)
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

// next skips white space and returns the next byte (0 at the end).
func (s *scanner) next() byte {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// value scans one value at depth (the number of containers around it). Recursion is bounded
// by MaxDepth.
func (s *scanner) value(depth int) error {
	switch s.next() {
	case '{':
		if depth >= MaxDepth {
			return s.fail(fmt.Sprintf("nesting is deeper than %d levels", MaxDepth))
		}
		return s.object(depth + 1)
	case '[':
		if depth >= MaxDepth {
			return s.fail(fmt.Sprintf("nesting is deeper than %d levels", MaxDepth))
		}
		return s.array(depth + 1)
	case '"':
		_, problem, err := s.str()
		if err != nil {
			return err
		}
		if problem != "" {
			return s.fail(problem)
		}
		return nil
	case 0:
		return errSyntax
	}
	// A number or literal: the decoder checks its spelling.
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			return nil
		}
		s.pos++
	}
	return nil
}

func (s *scanner) object(depth int) error {
	s.pos++ // {
	if s.next() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.next() != '"' {
			return errSyntax
		}
		key, problem, err := s.str()
		if err != nil {
			return err
		}
		if problem != "" {
			return s.fail("keys " + problem)
		}
		if s.next() != ':' {
			return errSyntax
		}
		s.pos++
		s.path = append(s.path, pathSeg{key: key, isKey: true})
		if err := s.value(depth); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		switch s.next() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return errSyntax
		}
	}
}

func (s *scanner) array(depth int) error {
	s.pos++ // [
	if s.next() == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		s.path = append(s.path, pathSeg{index: i})
		if err := s.value(depth); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		switch s.next() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return errSyntax
		}
	}
}

// str scans the string at s.pos and returns its raw text (decoded only when it has escapes,
// for the path of an object key) and the first problem in it.
func (s *scanner) str() (text, problem string, err error) {
	start := s.pos
	s.pos++ // "
	escaped := false
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			raw := s.data[start:s.pos]
			if !escaped {
				return string(raw[1 : len(raw)-1]), problem, nil
			}
			var v string
			if json.Unmarshal(raw, &v) != nil {
				return "", "", errSyntax
			}
			return v, problem, nil
		case c == '\\':
			escaped = true
			if s.pos+1 >= len(s.data) {
				return "", "", errSyntax
			}
			if s.data[s.pos+1] != 'u' {
				s.pos += 2
				continue
			}
			r, ok := s.hex4(s.pos + 2)
			if !ok {
				return "", "", errSyntax
			}
			s.pos += 6
			switch {
			case r == 0:
				problem = firstProblem(problem, problemNUL)
			case r >= 0xD800 && r < 0xDC00:
				// A high surrogate must be followed by an escaped low one.
				low, ok := rune(0), false
				if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
					low, ok = s.hex4(s.pos + 2)
				}
				if ok && low >= 0xDC00 && low < 0xE000 {
					s.pos += 6
				} else {
					problem = firstProblem(problem, problemUTF8+" (unpaired surrogate escape)")
				}
			case r >= 0xDC00 && r < 0xE000:
				problem = firstProblem(problem, problemUTF8+" (unpaired surrogate escape)")
			}
		case c < 0x20:
			return "", "", errSyntax // a raw control character: the decoder names it
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size <= 1 {
				problem = firstProblem(problem, problemUTF8)
				size = 1
			}
			s.pos += size
		}
	}
	return "", "", errSyntax
}

func firstProblem(have, p string) string {
	if have != "" {
		return have
	}
	return p
}

func (s *scanner) hex4(at int) (rune, bool) {
	if at+4 > len(s.data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s.data[at:at+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}
