package httpapi

import (
	"errors"
	"io"
	"net/http"

	"github.com/managed-agents/managed-agents/internal/wire"
)

// decodeBody reads a JSON object body into v: at most 32 MB (413 beyond), unknown fields
// rejected, every error naming the field.
func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &apiError{status: http.StatusRequestEntityTooLarge, errType: "request_too_large", msg: "Request exceeds the maximum allowed number of bytes (32 MB)."}
		}
		return badRequest("could not read request body: " + err.Error())
	}
	if len(body) == 0 {
		return badRequest("request body must be a JSON object")
	}
	if err := wire.DecodeStrict(body, v); err != nil {
		return badRequest(err.Error())
	}
	return nil
}

// decodeOptionalBody is decodeBody for endpoints whose body may be empty (archive).
func decodeOptionalBody(r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	if err != nil {
		return badRequest("could not read request body: " + err.Error())
	}
	if len(body) == 0 {
		return nil
	}
	var empty struct{}
	if err := wire.DecodeStrict(body, &empty); err != nil {
		return badRequest(err.Error())
	}
	return nil
}
