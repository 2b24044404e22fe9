package demorp

import (
	"slices"
	"testing"
)

func TestEventOutcome(t *testing.T) {
	cases := []struct {
		e    Event
		want string
	}{
		{Event{Ended: 0}, "accepted; no live session of this app to end (already signed out here)"},
		{Event{Ended: 1}, "accepted; ended this app's session"},
		{Event{Ended: 3}, "accepted; ended 3 sessions of this app"},
		{Event{Duplicate: true, JTI: "j1"}, "a repeat of an earlier token (jti j1), ignored"},
		{Event{Error: "bad signature"}, "refused: bad signature"},
	}
	for _, c := range cases {
		if got := c.e.Outcome(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.e, got, c.want)
		}
	}
}

func TestClaimRows(t *testing.T) {
	rows := claimRows(map[string]any{"sub": "u1", "amr": []any{"pwd", "otp"}, "aud": []any{}, "exp": float64(0), "x": true})
	want := []claimRow{
		{"amr", "pwd, otp", claimMeanings()["amr"]},
		{"aud", "(empty)", claimMeanings()["aud"]},
		{"exp", "1970-01-01 00:00:00 UTC", claimMeanings()["exp"]},
		{"sub", "u1", claimMeanings()["sub"]},
		{"x", "true", ""},
	}
	if !slices.Equal(rows, want) {
		t.Errorf("got %+v, want %+v", rows, want)
	}
}
