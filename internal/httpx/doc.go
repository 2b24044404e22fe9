// Package httpx holds the HTTP plumbing every surface of oidcd shares: the
// X-Correlation-ID header, the JSON ErrorResponse envelope,
// strict capped JSON bodies and small response writers.
package httpx
