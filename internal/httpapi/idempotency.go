package httpapi

import (
	"net/http"
)

// idempotencyKeyHeader makes POST /v1/sessions and POST /v1/sessions/{id}/events safe to
// retry (an extension; the hosted API has no such header): a retry with the same key and body
// gets the first answer and changes nothing.
const idempotencyKeyHeader = "Idempotency-Key"

// idempotencyKey returns the request's key, "" when it sends none. A header that is present
// must hold one key; its format is checked by the service (400).
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values(idempotencyKeyHeader)
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
		if vals[0] == "" {
			return "", badRequest(idempotencyKeyHeader + ": must not be empty")
		}
		return vals[0], nil
	}
	return "", badRequest(idempotencyKeyHeader + ": send the header once")
}
