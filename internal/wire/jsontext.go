package wire

import (
	"bytes"
	"unicode/utf8"
)

// Replacement is what LogSafeJSON puts in place of text PostgreSQL's jsonb cannot store: the
// Unicode replacement character U+FFFD. It is the character Go's encoding/json already writes
// for invalid UTF-8, so a NUL and a broken byte sequence end up the same, and unlike a
// visible "\0" it cannot be mistaken for text the command or the model really wrote.
const Replacement = "\uFFFD"

// replacementEscape is Replacement as a JSON escape, written where an escape was.
var replacementEscape = []byte(`\ufffd`)

// LogSafeJSON returns raw, a JSON value, with everything PostgreSQL's jsonb rejects replaced
// by U+FFFD: the escape \u0000 (SQLSTATE 22P05), a lone UTF-16 surrogate escape such as
// \ud800 (22P02), and invalid UTF-8. Command output, files and model answers may carry any of
// them (`find -print0`, `cat` of a binary file, a model asked to echo a NUL), and an event the
// log cannot store would fail its step on every retry. Every append goes through this
// (store.AppendEvents), so what is in the log is what the step meant minus those characters.
// Text that is already safe is returned unchanged and without copying; the result is valid
// JSON whenever raw is.
func LogSafeJSON(raw []byte) []byte {
	if utf8.Valid(raw) && !needsEscapeRewrite(raw) {
		return raw
	}
	out := make([]byte, 0, len(raw)+8)
	inString := false
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				out = append(out, Replacement...)
			} else {
				out = append(out, raw[i:i+n]...)
			}
			i += n
			continue
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(raw):
			if raw[i+1] != 'u' {
				out = append(out, raw[i:i+2]...)
				i += 2
				continue
			}
			n := unicodeEscape(raw, i, &out)
			i += n
			continue
		}
		out = append(out, c)
		i++
	}
	return out
}

// needsEscapeRewrite reports whether raw may hold a \u escape jsonb rejects: \u0000 or a
// surrogate (\ud800–\udfff). It may answer yes for text that only looks like one (an escaped
// backslash before "u0000"); LogSafeJSON's scan then keeps it.
func needsEscapeRewrite(raw []byte) bool {
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte(`\u`))
		if j < 0 || i+j+6 > len(raw) {
			return false
		}
		hex := raw[i+j+2 : i+j+6]
		if bytes.Equal(hex, []byte("0000")) || hex[0] == 'd' || hex[0] == 'D' {
			return true
		}
		i += j + 2
	}
}

// unicodeEscape copies the \u escape at raw[i] to out, or U+FFFD for a NUL or a surrogate
// that is not part of a valid pair, and returns how many bytes it consumed.
func unicodeEscape(raw []byte, i int, out *[]byte) int {
	v, ok := hex4(raw, i+2)
	if !ok {
		// Not a valid escape: the input is not JSON, and the database says so.
		*out = append(*out, raw[i:i+2]...)
		return 2
	}
	switch {
	case v == 0:
		*out = append(*out, replacementEscape...)
		return 6
	case v >= 0xd800 && v < 0xdc00:
		if i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
			if lo, ok := hex4(raw, i+8); ok && lo >= 0xdc00 && lo < 0xe000 {
				*out = append(*out, raw[i:i+12]...)
				return 12
			}
		}
		*out = append(*out, replacementEscape...)
		return 6
	case v >= 0xdc00 && v < 0xe000:
		*out = append(*out, replacementEscape...)
		return 6
	}
	*out = append(*out, raw[i:i+6]...)
	return 6
}

func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var v rune
	for _, c := range raw[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
