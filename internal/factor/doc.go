// Package factor holds what the sign-in pages (package signin) and the admin
// API share about second factors: authenticator-app secrets and codes
// (RFC 6238 via github.com/pquerna/otp), recovery codes, and the keys of
// the brute-force throttle.
package factor
