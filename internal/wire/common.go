package wire

import (
	"encoding/json"
	"time"
)

// Time renders timestamps as RFC 3339 in UTC with the database's microsecond precision, so a
// value read from a response can be sent back in a created_at[...] filter and compare exactly.
type Time time.Time

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	return json.Marshal(FormatTime(time.Time(t)))
}

// UnmarshalJSON reads an RFC 3339 timestamp (stored documents are read back with it).
func (t *Time) UnmarshalJSON(b []byte) error {
	var v time.Time
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = Time(v)
	return nil
}

// FormatTime formats t the way every response does.
func FormatTime(t time.Time) string {
	return t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
}

// TimePtr converts a nullable timestamp.
func TimePtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	w := Time(*t)
	return &w
}

// Metadata is the string→string bag on agents, environments and sessions. It always
// marshals as an object, never null.
type Metadata map[string]string

// MarshalJSON implements json.Marshaler.
func (m Metadata) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(map[string]string(m))
}

// MetadataPatch is the update form of metadata: a value upserts, null deletes, omitted keys stay.
type MetadataPatch map[string]*string

// Page is the list envelope. next_page and prev_page are omitted at the ends (API.md §17),
// never sent as "" and never null.
type Page[T any] struct {
	Data     []T    `json:"data"`
	NextPage string `json:"next_page,omitempty"`
	// PrevPage is only ever set on the sessions list.
	PrevPage string `json:"prev_page,omitempty"`
}

// Deleted is the 200 body of every delete endpoint.
type Deleted struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// ErrorEnvelope is the body of every error response (API.md §9.1).
type ErrorEnvelope struct {
	Type      string      `json:"type"`
	Error     ErrorObject `json:"error"`
	RequestID string      `json:"request_id"`
}

// ErrorObject is the inner error.
type ErrorObject struct {
	Type    string        `json:"type"`
	Message string        `json:"message"`
	Details *ErrorDetails `json:"details,omitempty"`
}

// ErrorDetails carries a stable machine code.
type ErrorDetails struct {
	ErrorCode string `json:"error_code"`
	// CurrentState is what a failed precondition found (heartbeat_precondition_failed).
	CurrentState any `json:"current_state,omitempty"`
}
