package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"

	bolt "go.etcd.io/bbolt"
)

// Branding is how the pages of a sign-in present the provider: the
// site's default (SetBranding) or an organization's own (Org.Branding,
// set with UpdateOrg). Every field may be empty; a page falls back to
// the site's default field by field only through BrandingFor, which
// takes one whole record (the organization's, else the site's). fsm
// checks bounds only; what a field may hold (a PNG or a safe SVG, a
// colour white text reads on) is the admin API's to check.
type Branding struct {
	DisplayName string `json:"display_name,omitempty" cbor:"1,keyasint,omitempty"`
	Logo        []byte `json:"logo,omitempty" cbor:"2,keyasint,omitempty"`
	// LogoType is "image/png" or "image/svg+xml" when Logo is set.
	LogoType     string `json:"logo_type,omitempty" cbor:"3,keyasint,omitempty"`
	PrimaryColor string `json:"primary_color,omitempty" cbor:"4,keyasint,omitempty"` // #rrggbb
	SupportURL   string `json:"support_url,omitempty" cbor:"5,keyasint,omitempty"`
	SupportEmail string `json:"support_email,omitempty" cbor:"6,keyasint,omitempty"`
}

// Bounds of a Branding.
const (
	MaxLogoBytes        = 64 << 10
	maxBrandingTextLen  = 1024 // display name, e-mail address (bytes)
	maxBrandingURLBytes = 2048
)

// IsZero reports whether b sets nothing.
func (b Branding) IsZero() bool {
	return b.DisplayName == "" && len(b.Logo) == 0 && b.LogoType == "" && b.PrimaryColor == "" &&
		b.SupportURL == "" && b.SupportEmail == ""
}

// validBranding checks the bounds of b (nil is valid: nothing to set).
func validBranding(b *Branding) bool {
	if b == nil {
		return true
	}
	switch b.LogoType {
	case "":
		if len(b.Logo) != 0 {
			return false
		}
	case "image/png", "image/svg+xml":
		if len(b.Logo) == 0 {
			return false
		}
	default:
		return false
	}
	return len(b.Logo) <= MaxLogoBytes && len(b.DisplayName) <= maxBrandingTextLen &&
		len(b.SupportEmail) <= maxBrandingTextLen && len(b.SupportURL) <= maxBrandingURLBytes &&
		(b.PrimaryColor == "" || len(b.PrimaryColor) == 7)
}

// SetBranding replaces the site's default branding; a zero Branding
// clears it. Value: the Branding stored.
type SetBranding struct {
	Branding Branding `json:"branding"`
}

var keyBranding = []byte("branding")

func init() {
	register(TypeSetBranding, applySetBranding)
}

func applySetBranding(tx *bolt.Tx, _ uint64, p []byte) Result {
	c := decode[SetBranding](p)
	if !validBranding(&c.Branding) {
		return invalid
	}
	var old Branding
	get(tx, bucketMeta, string(keyBranding), &old)
	indexLogo(tx, logoOwnerSite, &old, &c.Branding)
	meta := tx.Bucket(bucketMeta)
	if c.Branding.IsZero() {
		if err := meta.Delete(keyBranding); err != nil {
			panic(err)
		}
		return Result{Value: Branding{}}
	}
	put(tx, bucketMeta, string(keyBranding), c.Branding)
	return Result{Value: c.Branding}
}

// Branding returns the site's default branding (zero when none is set).
func (s *State) Branding() (Branding, error) {
	var b Branding
	err := s.f.view(func(tx *bolt.Tx) error { get(tx, bucketMeta, string(keyBranding), &b); return nil })
	return b, err
}

// BrandingFor returns the branding the pages of organization orgID show:
// the organization's own when it has one (and is not deleted), else the
// site's default, else the zero Branding. An empty or unknown orgID
// gives the site's.
func (s *State) BrandingFor(orgID string) (Branding, error) {
	var b Branding
	err := s.f.view(func(tx *bolt.Tx) error {
		var o Org
		if orgID != "" && get(tx, bucketOrgs, orgID, &o) && o.Status != OrgDeleted && o.Branding != nil {
			b = *o.Branding
			return nil
		}
		get(tx, bucketMeta, string(keyBranding), &b)
		return nil
	})
	return b, err
}

// BrandingGeneration changes right after every commit that may change
// what BrandingFor answers (a branding set, an organization changed or
// deleted) and after a restore. A cache that takes the generation before
// it reads, and keeps the answer under it, is current while the
// generation is unchanged (give or take the instant between a commit and
// its count, as if the read came just before the commit). It counts on
// this replica only.
func (s *State) BrandingGeneration() uint64 { return s.f.brandingGen.Load() }

// LogoHash is the name a logo is served under: the hex SHA-256 of its
// bytes ("" for no logo).
func LogoHash(logo []byte) string {
	if len(logo) == 0 {
		return ""
	}
	h := sha256.Sum256(logo)
	return hex.EncodeToString(h[:])
}

// The logo index: meta keys branding_logo/{LogoHash}/{owner}, the owner
// "site" or an organization's id, so that a logo is found by its hash
// (BrandingLogo) without reading every organization.
const (
	logoIndexPrefix = "branding_logo/"
	logoOwnerSite   = "site"
)

func logoIndexKey(hash, owner string) []byte { return []byte(logoIndexPrefix + hash + "/" + owner) }

// indexLogo moves owner's entry in the logo index from old's logo to
// next's (either may be nil or without a logo).
func indexLogo(tx *bolt.Tx, owner string, old, next *Branding) {
	meta := tx.Bucket(bucketMeta)
	if old != nil && len(old.Logo) > 0 {
		if err := meta.Delete(logoIndexKey(LogoHash(old.Logo), owner)); err != nil {
			panic(err)
		}
	}
	if next != nil && len(next.Logo) > 0 {
		if err := meta.Put(logoIndexKey(LogoHash(next.Logo), owner), nil); err != nil {
			panic(err)
		}
	}
}

// BrandingLogo returns the logo whose LogoHash is hash and its type, as
// the site's branding or an organization's (not a deleted one's) holds
// it; ok is false when none does.
func (s *State) BrandingLogo(hash string) (logo []byte, typ string, ok bool, err error) {
	if len(hash) != 2*sha256.Size {
		return nil, "", false, nil
	}
	err = s.f.view(func(tx *bolt.Tx) error {
		prefix := []byte(logoIndexPrefix + hash + "/")
		c := tx.Bucket(bucketMeta).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			owner := string(k[len(prefix):])
			var b Branding
			if owner == logoOwnerSite {
				get(tx, bucketMeta, string(keyBranding), &b)
			} else {
				var o Org
				if !get(tx, bucketOrgs, owner, &o) || o.Status == OrgDeleted || o.Branding == nil {
					continue
				}
				b = *o.Branding
			}
			if LogoHash(b.Logo) == hash {
				logo, typ, ok = append([]byte(nil), b.Logo...), b.LogoType, true
				return nil
			}
		}
		return nil
	})
	return logo, typ, ok, err
}
