package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"

	"github.com/managed-agents/managed-agents/internal/sandbox"
)

// SendJSON sends one request of a provider's JSON API: body (nil: none) marshaled as JSON,
// header adding the credentials (and whatever else the provider wants) before it is sent.
// It returns the answer when it is a success, to read and close, and otherwise the error of
// Check (a *StatusError, credential naming the variable of the credential), a transport
// error as Transport gives, or the context's error when ctx ended. op says what was asked.
func SendJSON(ctx context.Context, client *http.Client, method, url string, body any, header func(*http.Request), op, credential string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if header != nil {
		header(req)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return nil, Transport(op, err)
	}
	if err := Check(resp, op, credential); err != nil {
		return nil, err
	}
	return resp, nil
}

// CheckRef checks that ref is one of the provider's (an empty Provider is taken as its) and
// that its id has the shape id accepts (so a tampered id can never name another path).
func CheckRef(ref sandbox.Ref, provider string, id *regexp.Regexp) error {
	if ref.Provider != "" && ref.Provider != provider {
		return fmt.Errorf("sandbox ref of provider %q given to the %s provider: %w", ref.Provider, provider, sandbox.ErrForeignRef)
	}
	if !id.MatchString(ref.ExternalID) {
		return fmt.Errorf("%s sandbox id %q: %w", provider, ref.ExternalID, sandbox.ErrInvalidRef)
	}
	return nil
}
