package fsm

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// TestEventDetailJSON: detail.credential is an object in JSON and a
// string everywhere else; other values stay strings, even one that looks
// like JSON, and the JSON reads back to the same detail.
func TestEventDetailJSON(t *testing.T) {
	tests := []struct {
		name   string
		detail EventDetail
		json   string
	}{
		{"person", EventDetail{"action": "POST /clients", DetailCredential: `{"kind":"person","sub":"u1"}`},
			`{"action":"POST /clients","credential":{"kind":"person","sub":"u1"}}`},
		{"api key", EventDetail{DetailCredential: `{"kind":"api_key","id":"k1"}`}, `{"credential":{"kind":"api_key","id":"k1"}}`},
		{"token", EventDetail{DetailCredential: `{"kind":"token"}`, "target": "x"}, `{"credential":{"kind":"token"},"target":"x"}`},
		{"no credential", EventDetail{"reason": `{"kind":"token"}`}, `{"reason":"{\"kind\":\"token\"}"}`},
		{"not an object", EventDetail{DetailCredential: "token"}, `{"credential":"token"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.detail)
			if err != nil || string(b) != tt.json {
				t.Fatalf("marshal: got %s %v, want %s", b, err, tt.json)
			}
			var back EventDetail
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, tt.detail) {
				t.Fatalf("unmarshal: got %v %v, want %v", back, err, tt.detail)
			}
		})
	}
	var ev Event
	if err := json.Unmarshal([]byte(`{"seq":1,"detail":{"credential":{ "kind" : "token" }}}`), &ev); err != nil || ev.Detail[DetailCredential] != `{"kind":"token"}` {
		t.Fatalf("an event read from JSON: got %v %v", ev.Detail, err)
	}
}

// TestEventDetailHashesAsAMap: the hashed encoding of an event is that of
// a plain map of strings, so events written before EventDetail existed,
// and those with a credential, verify alike.
func TestEventDetailHashesAsAMap(t *testing.T) {
	d := map[string]string{"action": "DELETE /admins/{id}", DetailCredential: `{"kind":"api_key","id":"k1"}`}
	typed, err := hashEnc.Marshal(EventDetail(d))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := hashEnc.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(typed, plain) {
		t.Fatalf("hashed detail: got %x, want %x", typed, plain)
	}
	h := newHarness(t)
	seed(h)
	a := admin("POST /admins")
	a.Detail[DetailCredential] = `{"kind":"person","sub":"` + userA + `"}`
	h.applyStamped(TypeCreateAdminGrant, CreateAdminGrant{Grant: AdminGrant{ID: grantA, UserID: userB, Role: RoleAuditor, CreatedAt: t0}}, a)
	e := h.lastEvent()
	if e.Detail["target"] != grantA || e.Detail[DetailCredential] != a.Detail[DetailCredential] {
		t.Fatalf("event detail: got %v", e.Detail)
	}
	if v, err := h.f.State().VerifyAudit(); err != nil || !v.OK || v.Count == 0 {
		t.Fatalf("verify: got %+v %v", v, err)
	}
}
