package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSealOpen(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	b, _ := New(bytes.Repeat([]byte{1}, KeySize))
	other, _ := New(bytes.Repeat([]byte{2}, KeySize))
	type v struct{ A string }
	good, err := b.Seal("authz", v{"x"}, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	tampered := []byte(good)
	tampered[len(tampered)/2] ^= 'A' ^ 'B'
	cases := []struct {
		name, purpose, sealed string
		box                   *Box
		at                    time.Time
		wantErr               bool
	}{
		{"ok", "authz", good, b, now, false},
		{"other purpose", "csrf", good, b, now, true},
		{"other key", "authz", good, other, now, true},
		{"expired", "authz", good, b, now.Add(time.Minute), true},
		{"tampered", "authz", string(tampered), b, now, true},
		{"truncated", "authz", good[:10], b, now, true},
		{"not base64", "authz", "!!!", b, now, true},
		{"empty", "authz", "", b, now, true},
		{"huge", "authz", strings.Repeat("A", MaxSealed+1), b, now, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got v
			err := c.box.Open(c.purpose, c.sealed, c.at, &got)
			if c.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("got %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || got.A != "x" {
				t.Fatalf("got %+v %v, want x", got, err)
			}
		})
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("short key accepted")
	}
}
