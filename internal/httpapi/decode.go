package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// decodeBody reads a JSON object body into v: at most 32 MB (413 beyond), unknown fields
// rejected, every error naming the field. Every body passes wire.CheckText first, so no NUL,
// invalid UTF-8 or over-deep nesting reaches a validator or the database.
func decodeBody(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	// A bare null would decode as an empty object and blame the first required field.
	if len(bytes.TrimSpace(body)) == 0 || bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		return badRequest("request body must be a JSON object")
	}
	if err := wire.CheckText(body); err != nil {
		return badRequest(err.Error())
	}
	if err := wire.DecodeStrict(body, v); err != nil {
		return badRequest(err.Error())
	}
	return nil
}

// decodeOptionalBody is decodeBody for endpoints whose body may be empty (archive).
func decodeOptionalBody(r *http.Request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		return nil
	}
	if err := wire.CheckText(body); err != nil {
		return badRequest(err.Error())
	}
	var empty struct{}
	if err := wire.DecodeStrict(body, &empty); err != nil {
		return badRequest(err.Error())
	}
	return nil
}

// readBody reads at most 32 MB; a larger body is a 413 on every endpoint, including those
// whose body is optional.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, errType: "request_too_large", msg: "Request exceeds the maximum allowed number of bytes (32 MB)."}
		}
		return nil, badRequest("could not read request body: " + err.Error())
	}
	return body, nil
}
