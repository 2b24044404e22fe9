package oidc

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/oidcd/oidcd/internal/httpx"
	"github.com/oidcd/oidcd/internal/i18n"
	"github.com/oidcd/oidcd/keys"
)

// Paths of the protocol endpoints, relative to the issuer.
const (
	PathDiscovery  = "/.well-known/openid-configuration"
	PathJWKS       = "/.well-known/jwks.json"
	PathAuthorize  = "/authorize"
	PathToken      = "/oauth2/token" // #nosec G101 -- an endpoint path, not a credential
	PathUserinfo   = "/userinfo"
	PathRevoke     = "/oauth2/revoke"
	PathIntrospect = "/oauth2/introspect"
	PathEndSession = "/logout"
)

// JWKSMaxAge is the max-age of the key set, in seconds; package
// keys publishes a key longer than this before it signs.
const JWKSMaxAge = 300

// Values advertised in the discovery document. Read-only;
// the authorize validators check against the same lists.
var (
	acrValuesSupported    = []string{"urn:service:sso:acr:pwd", "urn:service:sso:acr:mfa", "urn:service:sso:acr:phone"}
	promptValuesSupported = []string{"none", "login", "select_account"}
	claimsSupported       = []string{"sub", "iss", "aud", "exp", "iat", "auth_time", "amr", "acr", "sid", "organization_id", "email", "email_verified"}
)

// discovery is the discovery document: the required fields first.
type discovery struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	UserinfoEndpoint                  string   `json:"userinfo_endpoint"`
	JWKSURI                           string   `json:"jwks_uri"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	IntrospectionEndpoint             string   `json:"introspection_endpoint"`
	EndSessionEndpoint                string   `json:"end_session_endpoint"`
	BackchannelLogoutSupported        bool     `json:"backchannel_logout_supported"`
	BackchannelLogoutSessionSupported bool     `json:"backchannel_logout_session_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	SubjectTypesSupported             []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported  []string `json:"id_token_signing_alg_values_supported"`
	ACRValuesSupported                []string `json:"acr_values_supported"`
	PromptValuesSupported             []string `json:"prompt_values_supported"`
	ClaimsSupported                   []string `json:"claims_supported"`
	// Beyond the required fields, as OpenID Connect Discovery and RFC 8414
	// recommend, exactly as the node behaves.
	ScopesSupported                            []string `json:"scopes_supported"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported"`
	IntrospectionEndpointAuthMethodsSupported  []string `json:"introspection_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethodsSupported     []string `json:"revocation_endpoint_auth_methods_supported"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
	UILocalesSupported                         []string `json:"ui_locales_supported"`
}

func newDiscovery(issuer string) discovery {
	base := strings.TrimSuffix(issuer, "/")
	return discovery{
		Issuer:                            issuer,
		AuthorizationEndpoint:             base + PathAuthorize,
		TokenEndpoint:                     base + PathToken,
		UserinfoEndpoint:                  base + PathUserinfo,
		JWKSURI:                           base + PathJWKS,
		RevocationEndpoint:                base + PathRevoke,
		IntrospectionEndpoint:             base + PathIntrospect,
		EndSessionEndpoint:                base + PathEndSession,
		BackchannelLogoutSupported:        true,
		BackchannelLogoutSessionSupported: true,
		GrantTypesSupported:               []string{"authorization_code"},
		ResponseTypesSupported:            []string{"code"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		SubjectTypesSupported:             []string{"public"},
		IDTokenSigningAlgValuesSupported:  []string{"RS256"},
		ACRValuesSupported:                acrValuesSupported,
		PromptValuesSupported:             promptValuesSupported,
		ClaimsSupported:                   claimsSupported,

		ScopesSupported:                            []string{"openid", "email", "profile"},
		TokenEndpointAuthMethodsSupported:          []string{"client_secret_basic", "client_secret_post", "none"},
		IntrospectionEndpointAuthMethodsSupported:  []string{"client_secret_basic", "client_secret_post"},
		RevocationEndpointAuthMethodsSupported:     []string{"client_secret_basic", "client_secret_post"},
		AuthorizationResponseIssParameterSupported: true,
		UILocalesSupported:                         i18n.Tags(),
	}
}

// DiscoveryHandler serves the discovery document of issuer.
// Endpoints are issuer, less one trailing slash, plus their paths; the
// issuer field is issuer exactly as given, which must be the iss of every
// token. The document is encoded once, here. Every answer carries
// Access-Control-Allow-Origin: * (cors.go).
func DiscoveryHandler(issuer string) http.Handler {
	body, err := json.Marshal(newDiscovery(issuer))
	if err != nil {
		// Unreachable for a struct of strings and bools; answer 503 with
		// the error envelope, as discovery may, rather than panic.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteError(w, r, http.StatusServiceUnavailable, httpx.CodeUnavailable, "discovery document unavailable")
		})
	}
	contentType, contentLength := []string{"application/json"}, []string{strconv.Itoa(len(body))}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// The header values are built once and shared by every answer:
		// nothing appends to them (Header.Add would copy a slice of
		// capacity one), and assigning canonical keys skips their
		// canonicalization.
		h := w.Header()
		h["Content-Type"] = contentType
		h["Content-Length"] = contentLength
		h["Access-Control-Allow-Origin"] = corsAnyOrigin
		w.Write(body)
	})
}

// KeySource yields the encoded key set; *keys.Manager is one. The bytes
// are not modified.
type KeySource interface {
	JWKS() ([]byte, error)
}

var _ KeySource = (*keys.Manager)(nil)

// JWKSHandler serves the key set with
// Cache-Control: public, max-age=300. When the source fails (no key yet,
// state unreadable) it answers 503 with no body, not cacheable, and logs
// the cause. Every answer carries Access-Control-Allow-Origin: *
// (cors.go).
func JWKSHandler(ks KeySource, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	contentType := []string{"application/json"}
	cacheControl := []string{"public, max-age=" + strconv.Itoa(JWKSMaxAge)}
	// The Content-Length of the last key set served: the bytes change only
	// when the key set does (keys.Manager re-encodes them), so the string
	// is reused until the length changes.
	type lengthHeader struct {
		n int
		v []string
	}
	var length atomic.Pointer[lengthHeader]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := ks.JWKS()
		if err != nil {
			log.Warn("key set unavailable", "err", err, "correlation_id", httpx.CorrelationID(r.Context()))
			w.Header().Set("Cache-Control", "no-store")
			w.Header()["Access-Control-Allow-Origin"] = corsAnyOrigin
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		cl := length.Load()
		if cl == nil || cl.n != len(body) {
			cl = &lengthHeader{n: len(body), v: []string{strconv.Itoa(len(body))}}
			length.Store(cl)
		}
		// Shared header values, as in DiscoveryHandler.
		h := w.Header()
		h["Content-Type"] = contentType
		h["Cache-Control"] = cacheControl
		h["Content-Length"] = cl.v
		h["Access-Control-Allow-Origin"] = corsAnyOrigin
		w.Write(body)
	})
}
