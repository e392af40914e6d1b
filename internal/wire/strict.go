package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DecodeStrict decodes one JSON value into v, rejecting unknown fields and trailing data.
// Errors name the offending field the way API clients see them ("agent.model: …").
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return DescribeJSONError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// DescribeJSONError turns encoding/json errors into messages that name the field.
func DescribeJSONError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return fmt.Errorf("expected %s, got JSON %s", jsonKind(typeErr.Type.String()), typeErr.Value)
		}
		return fmt.Errorf("%s: expected %s, got JSON %s", field, jsonKind(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
	case errors.Is(err, io.EOF):
		return errors.New("request body must be a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("malformed JSON: unexpected end of input")
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", Excerpt(name, maxPathSegment))
	}
	return errors.New(strings.TrimPrefix(msg, "json: "))
}

func jsonKind(goType string) string {
	switch {
	case goType == "string" || strings.HasSuffix(goType, "Nullable[string]"):
		return "a string"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint") || strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map[") || strings.Contains(goType, "wire."):
		return "an object"
	}
	return goType
}

// prefixErr puts a field path in front of a nested decoding error.
func prefixErr(field string, err error) error {
	return fmt.Errorf("%s: %w", field, err)
}
