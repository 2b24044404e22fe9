package oidc

import (
	"encoding/json"
	"net/http"
)

// The errors of the back-channel endpoints. Descriptions are constant:
// they name our parameters, never echo a value the client sent.
var (
	errTokMalformed       = &Error{Code: "invalid_request", Description: "malformed request body", Status: http.StatusBadRequest}
	errTokContentType     = &Error{Code: "invalid_request", Description: "the body must be application/x-www-form-urlencoded", Status: http.StatusBadRequest}
	errTokRepeated        = &Error{Code: "invalid_request", Description: "a parameter is repeated", Status: http.StatusBadRequest}
	errTokTwoAuth         = &Error{Code: "invalid_request", Description: "more than one client authentication method", Status: http.StatusBadRequest}
	errTokNoGrantType     = &Error{Code: "invalid_request", Description: "grant_type is required", Status: http.StatusBadRequest}
	errTokGrantType       = &Error{Code: "unsupported_grant_type", Description: "only authorization_code is supported", Status: http.StatusBadRequest}
	errTokNoCode          = &Error{Code: "invalid_request", Description: "code is required", Status: http.StatusBadRequest}
	errTokNoRedirectURI   = &Error{Code: "invalid_request", Description: "redirect_uri is required", Status: http.StatusBadRequest}
	errTokNoVerifier      = &Error{Code: "invalid_request", Description: "code_verifier is required", Status: http.StatusBadRequest}
	errTokVerifierSyntax  = &Error{Code: "invalid_request", Description: "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~", Status: http.StatusBadRequest}
	errTokScope           = &Error{Code: "invalid_request", Description: "scope must be a subset of the granted scopes", Status: http.StatusBadRequest}
	errTokCodeExpired     = &Error{Code: "invalid_request", Description: "the code has expired", Status: http.StatusBadRequest}
	errTokGrant           = &Error{Code: "invalid_grant", Description: "the code is invalid, used, revoked or was issued to another client", Status: http.StatusBadRequest}
	errTokVerifier        = &Error{Code: "invalid_grant", Description: "code_verifier does not match the code_challenge", Status: http.StatusBadRequest}
	errTokAccessChanged   = &Error{Code: "invalid_grant", Description: "access changed since sign-in", Status: http.StatusBadRequest}
	errTokNoToken         = &Error{Code: "invalid_request", Description: "token is required", Status: http.StatusBadRequest}
	errTokClient          = &Error{Code: "invalid_client", Description: "client authentication failed", Status: http.StatusUnauthorized}
	errTokServer          = &Error{Code: "server_error", Status: http.StatusInternalServerError}
	errTokUnavailable     = &Error{Code: "temporarily_unavailable", Description: "try again shortly", Status: http.StatusServiceUnavailable}
	errTokUnavailableSign = &Error{Code: "temporarily_unavailable", Description: "no signing key available; try again shortly", Status: http.StatusServiceUnavailable}
)

// oauthError is the JSON body of an error (RFC 6749 5.2).
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// writeOAuthError answers e as {"error", "error_description"} JSON, not
// cacheable.
func writeOAuthError(w http.ResponseWriter, e *Error) {
	body, _ := json.Marshal(oauthError{Error: e.Code, Description: e.Description}) // two strings: cannot fail
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(e.Status)
	w.Write(body)
}

// The header values of writeNoStoreJSON, shared by every answer (set
// under their canonical keys, they skip canonicalization and an
// allocation each). Nothing modifies them: Header.Add would copy these
// slices of capacity one.
var (
	hdrJSON    = []string{"application/json"}
	hdrNoStore = []string{"no-store"}
	hdrNoCache = []string{"no-cache"}
)

// writeNoStoreJSON answers 200 with v, not cacheable.
func writeNoStoreJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeOAuthError(w, errTokServer)
		return
	}
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h["Cache-Control"] = hdrNoStore
	h["Pragma"] = hdrNoCache
	w.Write(body)
}
