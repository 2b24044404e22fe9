// Package httpx holds the HTTP plumbing every surface of oidcd shares: the
// X-Correlation-ID header, the ErrorResponse envelope of SPEC.md 2.11,
// strict capped JSON bodies and small response writers.
package httpx
