package password

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// cheap keeps tests fast; the format and code paths are the same.
var cheap = Params{Memory: 64, Time: 1, Threads: 1}

func TestHashVerify(t *testing.T) {
	h := New(cheap, 2)
	ctx := context.Background()
	tests := []struct {
		name   string
		secret string
		try    string
		want   bool
	}{
		{"round trip", "correct horse battery staple", "correct horse battery staple", true},
		{"empty secret", "", "", true},
		{"unicode", "pässwörd✓", "pässwörd✓", true},
		{"wrong secret", "correct horse", "correct hors", false},
		{"case differs", "Secret", "secret", false},
		{"empty try", "secret", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			phc, err := h.Hash(ctx, tt.secret)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(phc, "$argon2id$v=19$m=64,t=1,p=1$") {
				t.Errorf("got %q, want prefix %q", phc, "$argon2id$v=19$m=64,t=1,p=1$")
			}
			got, err := h.Verify(ctx, tt.try, phc)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHashSaltsDiffer(t *testing.T) {
	h := New(cheap, 1)
	a, _ := h.Hash(context.Background(), "same")
	b, _ := h.Hash(context.Background(), "same")
	if a == b {
		t.Errorf("got %q twice, want different salts", a)
	}
	_, salt, key, err := Decode(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(salt) != SaltLen || len(key) != KeyLen {
		t.Errorf("got salt %d key %d bytes, want %d and %d", len(salt), len(key), SaltLen, KeyLen)
	}
}

// TestVerifyReadsParams checks that Verify uses the parameters in the string,
// not the Hasher's: a hash made with other costs still verifies.
func TestVerifyReadsParams(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		p    Params
		want string
	}{
		{"memory", Params{Memory: 128, Time: 1, Threads: 1}, "m=128,t=1,p=1"},
		{"time", Params{Memory: 64, Time: 3, Threads: 1}, "m=64,t=3,p=1"},
		{"threads", Params{Memory: 64, Time: 1, Threads: 2}, "m=64,t=1,p=2"},
	}
	verifier := New(cheap, 1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			phc, err := New(tt.p, 1).Hash(ctx, "pw")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Split(phc, "$")[3]; got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			p, _, _, err := Decode(phc)
			if err != nil {
				t.Fatal(err)
			}
			if p != tt.p {
				t.Errorf("got %+v, want %+v", p, tt.p)
			}
			ok, err := verifier.Verify(ctx, "pw", phc)
			if err != nil || !ok {
				t.Errorf("got %v, %v, want true, nil", ok, err)
			}
		})
	}
}

func TestVerifyMalformed(t *testing.T) {
	h := New(cheap, 1)
	ctx := context.Background()
	good, err := h.Hash(ctx, "pw")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, "$")
	salt, key := parts[4], parts[5]
	with := func(i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, "$")
	}
	tests := []struct {
		name string
		phc  string
	}{
		{"empty", ""},
		{"not phc", "hunter2"},
		{"missing leading dollar", strings.TrimPrefix(good, "$")},
		{"too few fields", "$argon2id$v=19$m=64,t=1,p=1$" + salt},
		{"too many fields", good + "$extra"},
		{"algorithm argon2i", with(1, "argon2i")},
		{"algorithm bcrypt", with(1, "2b")},
		{"version 16", with(2, "v=16")},
		{"version missing", with(2, "19")},
		{"params order", with(3, "t=1,m=64,p=1")},
		{"params two", with(3, "m=64,t=1")},
		{"params four", with(3, "m=64,t=1,p=1,k=2")},
		{"memory not a number", with(3, "m=x,t=1,p=1")},
		{"memory negative", with(3, "m=-1,t=1,p=1")},
		{"memory huge", with(3, "m=4194304,t=1,p=1")},
		{"memory overflow", with(3, "m=99999999999,t=1,p=1")},
		{"memory below 8 per lane", with(3, "m=8,t=1,p=2")},
		{"time zero", with(3, "m=64,t=0,p=1")},
		{"time huge", with(3, "m=64,t=1000,p=1")},
		{"threads zero", with(3, "m=64,t=1,p=0")},
		{"threads 256", with(3, "m=64,t=1,p=256")},
		{"threads empty", with(3, "m=64,t=1,p=")},
		{"salt not base64", with(4, "!!!!")},
		{"salt padded", with(4, salt+"==")},
		{"salt empty", with(4, "")},
		{"salt short", with(4, "AAAA")},
		{"hash not base64", with(5, "@@@@")},
		{"hash empty", with(5, "")},
		{"hash short", with(5, key[:8])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := h.Verify(ctx, "pw", tt.phc)
			if ok {
				t.Errorf("got true for %q, want false", tt.phc)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("got %v, want %v", err, ErrMalformed)
			}
		})
	}
}

func TestContextWhileWaiting(t *testing.T) {
	h := New(cheap, 1)
	h.sem <- struct{}{} // occupy the only slot
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := h.Hash(ctx, "pw"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want %v", err, context.DeadlineExceeded)
	}
	phc := encode(cheap, make([]byte, SaltLen), make([]byte, KeyLen))
	if _, err := h.Verify(ctx, "pw", phc); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want %v", err, context.DeadlineExceeded)
	}
	<-h.sem
	if _, err := h.Hash(context.Background(), "pw"); err != nil {
		t.Errorf("got %v after release, want nil", err)
	}
}

func TestConcurrencyBound(t *testing.T) {
	h := New(cheap, 0)
	if got := cap(h.sem); got != 1 {
		t.Errorf("got %d, want %d", got, 1)
	}
	h = New(Params{}, 4)
	if got := h.Params(); got != DefaultParams() {
		t.Errorf("got %+v, want %+v", got, DefaultParams())
	}
	if got := cap(h.sem); got != 4 {
		t.Errorf("got %d, want %d", got, 4)
	}
}

func BenchmarkHash(b *testing.B) {
	h := New(DefaultParams(), 1)
	ctx := context.Background()
	for b.Loop() {
		if _, err := h.Hash(ctx, "correct horse battery staple"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyDefault: one argon2id check at the production parameters
// (OWASP's m=19 MiB, t=2, p=1), as many at once as there are cores: the
// ceiling of a local password sign-in.
func BenchmarkVerifyDefault(b *testing.B) {
	h := New(DefaultParams(), runtime.GOMAXPROCS(0))
	phc, _ := h.Hash(context.Background(), "correct horse battery staple")
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if ok, err := h.Verify(context.Background(), "correct horse battery staple", phc); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}
