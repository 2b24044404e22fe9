package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DetailCredential is the detail key of an admin event that says who
// acted: a compact JSON object, {"kind":"person","sub":...},
// {"kind":"api_key","id":...} or {"kind":"token"}, never the secret.
const DetailCredential = "credential"

// EventDetail is an event's detail: a map of strings, stored and hashed
// as such (the CBOR of a map of text strings), so events written before
// DetailCredential existed verify as they did. In JSON, the one value
// that is structured, DetailCredential's, is written as the object it
// holds (detail.credential.kind), and read back from one.
type EventDetail map[string]string

// MarshalJSON writes d, with DetailCredential's value as an object.
func (d EventDetail) MarshalJSON() ([]byte, error) {
	cred, ok := d[DetailCredential]
	if !ok || !jsonObject(cred) {
		return json.Marshal(map[string]string(d))
	}
	m := make(map[string]any, len(d))
	for k, v := range d {
		m[k] = v
	}
	m[DetailCredential] = json.RawMessage(cred)
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes: a value that is not a
// string (the credential's object) is kept as its compact JSON text.
func (d *EventDetail) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*d = nil
		return nil
	}
	out := make(EventDetail, len(raw))
	for k, v := range raw {
		if len(v) > 0 && v[0] == '"' {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			out[k] = s
			continue
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return fmt.Errorf("fsm: event detail %q: %w", k, err)
		}
		out[k] = c.String()
	}
	*d = out
	return nil
}

// jsonObject reports whether s is the text of a JSON object.
func jsonObject(s string) bool {
	return len(s) >= 2 && s[0] == '{' && json.Valid([]byte(s))
}
