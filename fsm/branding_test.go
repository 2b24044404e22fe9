package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBrandingResolves(t *testing.T) {
	h := newHarness(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h.mustApply(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "a", Name: "A", CreatedAt: at})
	h.mustApply(TypeCreateOrg, CreateOrg{ID: orgB, Slug: "b", Name: "B", CreatedAt: at})
	s := h.f.State()
	want := func(org, name string) {
		t.Helper()
		b, err := s.BrandingFor(org)
		if err != nil || b.DisplayName != name {
			t.Fatalf("BrandingFor(%q) = %q, %v; want %q", org, b.DisplayName, err, name)
		}
	}
	want(orgA, "")
	want("", "")

	site := Branding{DisplayName: "Site", Logo: []byte("\x89PNG"), LogoType: "image/png", PrimaryColor: "#005a9c",
		SupportURL: "https://help.example.com/", SupportEmail: "help@example.com"}
	h.mustApply(TypeSetBranding, SetBranding{Branding: site})
	if b, _ := s.Branding(); b.DisplayName != "Site" || !bytes.Equal(b.Logo, site.Logo) || b.SupportEmail != site.SupportEmail {
		t.Fatalf("site branding %+v", b)
	}
	want(orgA, "Site")
	want("unknown", "Site")

	h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgA, Branding: &Branding{DisplayName: "Org A"}})
	want(orgA, "Org A") // the organization's own, whole: no field falls through
	if b, _ := s.BrandingFor(orgA); len(b.Logo) != 0 {
		t.Errorf("the organization's branding took the site's logo")
	}
	want(orgB, "Site")

	// Renaming keeps the branding; an empty one clears it.
	n := "A2"
	h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgA, Name: &n})
	want(orgA, "Org A")
	h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgA, Branding: &Branding{}})
	want(orgA, "Site")
	if o, _ := s.Org(orgA); o.Branding != nil {
		t.Errorf("cleared branding stored as %+v", o.Branding)
	}

	// A deleted organization's pages are the site's.
	h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgB, Branding: &Branding{DisplayName: "Org B"}})
	want(orgB, "Org B")
	h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgB, At: at})
	want(orgB, "Site")

	h.mustApply(TypeSetBranding, SetBranding{})
	want("", "")
}

func TestBrandingBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		b    Branding
	}{
		{"logo too large", Branding{Logo: make([]byte, MaxLogoBytes+1), LogoType: "image/png"}},
		{"logo without a type", Branding{Logo: []byte("x")}},
		{"type without a logo", Branding{LogoType: "image/png"}},
		{"other type", Branding{Logo: []byte("x"), LogoType: "image/gif"}},
		{"long name", Branding{DisplayName: strings.Repeat("x", 1025)}},
		{"long url", Branding{SupportURL: "https://" + strings.Repeat("x", 2048)}},
		{"bad colour length", Branding{PrimaryColor: "#fff"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.mustApply(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "a", Name: "A"})
			if r := h.apply(TypeSetBranding, SetBranding{Branding: c.b}); !errors.Is(r.Err, ErrInvalid) {
				t.Errorf("SetBranding: %v, want ErrInvalid", r.Err)
			}
			b := c.b
			if r := h.apply(TypeUpdateOrg, UpdateOrg{ID: orgA, Branding: &b}); !errors.Is(r.Err, ErrInvalid) {
				t.Errorf("UpdateOrg: %v, want ErrInvalid", r.Err)
			}
		})
	}
	h := newHarness(t)
	if r := h.apply(TypeSetBranding, SetBranding{Branding: Branding{Logo: make([]byte, MaxLogoBytes), LogoType: "image/svg+xml"}}); r.Err != nil {
		t.Errorf("a logo of exactly the limit: %v", r.Err)
	}
}

func TestBrandingLogoByHash(t *testing.T) {
	h := newHarness(t)
	h.mustApply(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "a", Name: "A"})
	h.mustApply(TypeCreateOrg, CreateOrg{ID: orgB, Slug: "b", Name: "B"})
	s := h.f.State()
	served := func(logo []byte, want bool) {
		t.Helper()
		got, typ, ok, err := s.BrandingLogo(LogoHash(logo))
		if err != nil || ok != want || (ok && (!bytes.Equal(got, logo) || typ != "image/png")) {
			t.Fatalf("BrandingLogo(%q): %q %q %v %v, want served %v", logo, got, typ, ok, err, want)
		}
	}
	one, two, three := []byte("logo one"), []byte("logo two"), []byte("logo three")
	png := func(b []byte) Branding { return Branding{Logo: b, LogoType: "image/png"} }
	b1, b2 := png(one), png(two)
	h.mustApply(TypeSetBranding, SetBranding{Branding: b1})
	served(one, true)
	h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgA, Branding: &b2})
	h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgB, Branding: &b2})
	served(two, true)
	// Replaced: the old hash is gone, the new one served.
	h.mustApply(TypeSetBranding, SetBranding{Branding: png(three)})
	served(one, false)
	served(three, true)
	// Two owners of one logo: it is served until both let it go.
	h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgA, Branding: &Branding{}})
	served(two, true)
	h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgB})
	served(two, false)
	if _, _, ok, _ := s.BrandingLogo("not-a-hash"); ok {
		t.Error("a malformed hash was served")
	}
}

// TestBrandingGeneration: every command that can change what BrandingFor
// answers, and a restore, moves the generation a cache keys on; others
// leave it.
func TestBrandingGeneration(t *testing.T) {
	h := newHarness(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := h.f.State()
	step := func(name string, moves bool, do func()) {
		t.Helper()
		before := s.BrandingGeneration()
		do()
		if after := s.BrandingGeneration(); (after > before) != moves {
			t.Errorf("%s: generation %d to %d, want moved %v", name, before, after, moves)
		}
	}
	step("create an organization", false, func() { h.mustApply(TypeCreateOrg, CreateOrg{ID: orgA, Slug: "a", Name: "A", CreatedAt: at}) })
	step("set the site's branding", true, func() { h.mustApply(TypeSetBranding, SetBranding{Branding: Branding{DisplayName: "S"}}) })
	step("update an organization", true, func() { h.mustApply(TypeUpdateOrg, UpdateOrg{ID: orgA, Branding: &Branding{DisplayName: "A"}}) })
	step("delete an organization", true, func() { h.mustApply(TypeDeleteOrg, DeleteOrg{ID: orgA, At: at}) })
	step("restore", true, func() { restoreFrom(t, h.f, h.f) })
}
