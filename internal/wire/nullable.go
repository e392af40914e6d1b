package wire

import (
	"bytes"
	"encoding/json"
)

// Nullable tells apart the three states of an update field: omitted (Set false),
// explicit null (Set and Null) and a value. "Omit to preserve, null to clear" needs all three.
type Nullable[T any] struct {
	Set   bool
	Null  bool
	Value T
}

// UnmarshalJSON is only called when the key is present, which is what makes Set meaningful.
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		n.Null = true
		return nil
	}
	return json.Unmarshal(b, &n.Value)
}

// MarshalJSON writes null for an unset or null value.
func (n Nullable[T]) MarshalJSON() ([]byte, error) {
	if !n.Set || n.Null {
		return []byte("null"), nil
	}
	return json.Marshal(n.Value)
}

// HasValue reports whether a non-null value was given.
func (n Nullable[T]) HasValue() bool { return n.Set && !n.Null }
