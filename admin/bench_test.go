package admin

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkCreateOrg measures one admin write through the whole handler:
// authentication, decoding, validation, the command's bbolt transaction
// and the answer.
func BenchmarkCreateOrg(b *testing.B) {
	e := newEnv(b)
	i := 0
	for b.Loop() {
		i++
		r := httptest.NewRequest("POST", "/admin/v1/organizations",
			strings.NewReader(fmt.Sprintf(`{"slug":"org-%d","name":"Org %d"}`, i, i)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+e.token)
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		if w.Code != 201 {
			b.Fatalf("got %d, want 201: %s", w.Code, w.Body)
		}
	}
}
