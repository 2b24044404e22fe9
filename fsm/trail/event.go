package trail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Event is one entry of the trail. Its fields, json and cbor tags are
// those of fsm.Event, which becomes an alias of this type: the CBOR of an
// event under these tags is what its hash covers (EventHash), so neither a
// field nor a tag may change.
type Event struct {
	Seq      uint64      `json:"seq" cbor:"1,keyasint"`
	Time     time.Time   `json:"time" cbor:"2,keyasint"`
	Type     string      `json:"type" cbor:"3,keyasint"`
	Outcome  string      `json:"outcome" cbor:"4,keyasint"`
	Actor    string      `json:"actor" cbor:"5,keyasint"`
	Subject  string      `json:"subject,omitempty" cbor:"6,keyasint,omitempty"`
	ClientID string      `json:"client_id,omitempty" cbor:"7,keyasint,omitempty"`
	OrgID    string      `json:"organization_id,omitempty" cbor:"8,keyasint,omitempty"`
	SID      string      `json:"sid,omitempty" cbor:"9,keyasint,omitempty"`
	IP       string      `json:"ip,omitempty" cbor:"10,keyasint,omitempty"`
	Node     string      `json:"node" cbor:"11,keyasint"`
	Detail   EventDetail `json:"detail,omitempty" cbor:"12,keyasint,omitempty"`
	PrevHash string      `json:"prev_hash" cbor:"13,keyasint"`
	Hash     string      `json:"hash" cbor:"14,keyasint"`
}

// DetailCredential is the detail key of an admin event that says who
// acted: a compact JSON object, {"kind":"person","sub":...},
// {"kind":"api_key","id":...} or {"kind":"token"}, never the secret.
const DetailCredential = "credential"

// EventDetail is an event's detail: a map of strings, stored and hashed
// as such (the CBOR of a map of text strings), so events written before
// DetailCredential existed verify as they did. In JSON, the one value
// that is structured, DetailCredential's, is written as the object it
// holds (detail.credential.kind), and read back from one. It is
// fsm.EventDetail, moved here with Event.
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
			return fmt.Errorf("trail: event detail %q: %w", k, err)
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

// EventHash is an event's hash: hex SHA-256 over the bytes of prev_hash
// (hex-decoded; none for the first event ever written) followed by the
// CBOR core deterministic encoding (RFC 8949 section 4.2.1, times as RFC
// 3339 text with nanoseconds, a zero time as null) of the event with hash
// empty. It is fsm.EventHash, computed without reflection: the importer
// of a peer's trail hashes millions of events, and the encoder of
// fxamacker/cbor spends most of its time discovering the struct. A test
// holds the two equal.
func EventHash(e Event) (string, error) {
	sum, _, err := eventSum(&e, nil)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum[:]), nil
}

// eventSum is the raw hash of e; buf is scratch space, returned grown for
// the next call.
func eventSum(e *Event, buf []byte) ([32]byte, []byte, error) {
	buf = buf[:0]
	var err error
	if buf, err = appendHexDecoded(buf, e.PrevHash); err != nil {
		return [32]byte{}, buf, fmt.Errorf("prev_hash: %w", err)
	}
	buf = appendEventCBOR(buf, e)
	return sha256.Sum256(buf), buf, nil
}

// appendHexDecoded appends the bytes s spells in hex, as hex.DecodeString
// reads them (either case).
func appendHexDecoded(b []byte, s string) ([]byte, error) {
	n := len(b)
	b = slices.Grow(b, len(s)/2)[:n+len(s)/2]
	if _, err := hex.Decode(b[n:], []byte(s)); err != nil {
		return b[:n], err
	}
	return b, nil
}

// CBOR major types.
const (
	cborUint = 0 << 5
	cborText = 3 << 5
	cborMap  = 5 << 5
	cborNull = 0xf6
)

// appendHead appends a CBOR head in its shortest form.
func appendHead(b []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(b, major|byte(n))
	case n <= 0xff:
		return append(b, major|24, byte(n))
	case n <= 0xffff:
		return append(b, major|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return append(b, major|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, major|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
		byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendText(b []byte, s string) []byte {
	return append(appendHead(b, cborText, uint64(len(s))), s...)
}

// appendEventCBOR appends the core deterministic CBOR of e with Hash
// empty, as fxamacker/cbor writes it for Event: a map whose keys are the
// field numbers in ascending order (one byte each, so the sorted order is
// the numeric one), omitempty fields left out when empty, the detail map's
// keys sorted by their encoded bytes (that is, shorter first, then
// bytewise), strings as text whatever their bytes.
func appendEventCBOR(b []byte, e *Event) []byte {
	n := 8
	for _, s := range [...]string{e.Subject, e.ClientID, e.OrgID, e.SID, e.IP} {
		if s != "" {
			n++
		}
	}
	if len(e.Detail) > 0 {
		n++
	}
	b = appendHead(b, cborMap, uint64(n))
	b = appendHead(append(b, 1), cborUint, e.Seq)
	b = append(b, 2)
	if e.Time.IsZero() {
		b = append(b, cborNull)
	} else {
		var scratch [48]byte
		ts := e.Time.AppendFormat(scratch[:0], time.RFC3339Nano)
		b = append(appendHead(b, cborText, uint64(len(ts))), ts...)
	}
	b = appendText(append(b, 3), e.Type)
	b = appendText(append(b, 4), e.Outcome)
	b = appendText(append(b, 5), e.Actor)
	for i, s := range [...]string{e.Subject, e.ClientID, e.OrgID, e.SID, e.IP} {
		if s != "" {
			b = appendText(append(b, byte(6+i)), s)
		}
	}
	b = appendText(append(b, 11), e.Node)
	if len(e.Detail) > 0 {
		b = appendDetailCBOR(append(b, 12), e.Detail)
	}
	b = appendText(append(b, 13), e.PrevHash)
	return appendText(append(b, 14), "")
}

// appendDetailCBOR appends d with its keys in core deterministic order.
func appendDetailCBOR(b []byte, d EventDetail) []byte {
	var arr [8]string
	keys := arr[:0]
	for k := range d {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cborKeyCompare)
	b = appendHead(b, cborMap, uint64(len(keys)))
	for _, k := range keys {
		b = appendText(appendText(b, k), d[k])
	}
	return b
}

// cborKeyCompare orders text keys as their encodings compare bytewise: the
// head holds the length, so a shorter key comes first.
func cborKeyCompare(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}
