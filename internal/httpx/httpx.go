package httpx

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// MaxCorrelationID is the longest client-sent X-Correlation-ID that is echoed
// (up to 128 bytes); a longer one is replaced by a generated id.
const MaxCorrelationID = 128

// HeaderCorrelationID is the tracing header.
const HeaderCorrelationID = "X-Correlation-ID"

type ctxKey struct{}

// Correlation is middleware that gives every request a correlation id (the
// client's, when it is printable and at most 128 bytes, else a fresh one),
// stores it in the context and sets it on the response before the handler
// runs.
func Correlation(next http.Handler) http.Handler { return CorrelationWith(nil)(next) }

// CorrelationWith is Correlation that also lets more add to the request's
// context (nil: nothing), so that the request is copied once for both.
func CorrelationWith(more func(ctx context.Context, r *http.Request) context.Context) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get(HeaderCorrelationID)
			if !validCorrelationID(id) {
				id = newCorrelationID()
			}
			// The canonical key assigned directly: Set would canonicalize
			// "X-Correlation-ID" into a new string on every request.
			w.Header()[canonicalCorrelationID] = []string{id}
			ctx := context.WithValue(r.Context(), ctxKey{}, id)
			if more != nil {
				ctx = more(ctx, r)
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

func validCorrelationID(id string) bool {
	if id == "" || len(id) > MaxCorrelationID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// CorrelationID returns the request's correlation id ("" outside Correlation).
func CorrelationID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// canonicalCorrelationID is HeaderCorrelationID as net/http keys it.
var canonicalCorrelationID = http.CanonicalHeaderKey(HeaderCorrelationID)

// correlationIDs numbers the correlation ids this process generates:
// each is a counter encrypted with AES under a key drawn at start. The
// ids are unique (a block cipher is a permutation and the counter does
// not repeat; another process has another key) and, unlike a bare
// counter, say nothing about how many requests came before; they cost a
// block encryption, not a read of the system's random source. They are
// not secrets: NewID is for values that must be.
var correlationIDs struct {
	block cipher.Block
	n     atomic.Uint64
}

func init() {
	var key [16]byte
	rand.Read(key[:])
	b, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // unreachable: a 16-byte key is valid
	}
	correlationIDs.block = b
}

// newCorrelationID is a fresh correlation id: 32 hex digits, as NewID's.
func newCorrelationID() string {
	var in, out [16]byte
	binary.BigEndian.PutUint64(in[8:], correlationIDs.n.Add(1))
	correlationIDs.block.Encrypt(out[:], in[:])
	return hex.EncodeToString(out[:])
}

// NewID returns 16 random bytes in hex.
func NewID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Error codes of the envelope.
const (
	CodeValidation   = "VALIDATION_ERROR"
	CodeBadRequest   = "BAD_REQUEST"
	CodeUnauthorized = "UNAUTHORIZED"
	CodeForbidden    = "FORBIDDEN"
	CodeNotFound     = "NOT_FOUND"
	CodeConflict     = "CONFLICT"
	CodeUnprocessble = "UNPROCESSABLE"
	CodeRateLimited  = "RATE_LIMITED"
	CodeInternal     = "INTERNAL_ERROR"
	CodeUnavailable  = "SERVICE_UNAVAILABLE" // an addition to the codes above; only used by the admin API on 503
)

// Detail is one field problem of a VALIDATION_ERROR.
type Detail struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

// Envelope is the JSON error envelope (ErrorResponse; the ErrorEnvelope
// schema of docs/openapi/oidc.json).
type Envelope struct {
	Error EnvelopeError `json:"error"`
}

// EnvelopeError is the body of Envelope.
type EnvelopeError struct {
	Code          string   `json:"code"`
	Message       string   `json:"message"`
	CorrelationID string   `json:"correlation_id"`
	Timestamp     string   `json:"timestamp"`
	Details       []Detail `json:"details,omitempty"`
}

// WriteError answers with the envelope.
func WriteError(w http.ResponseWriter, r *http.Request, status int, code, message string, details ...Detail) {
	WriteJSON(w, status, NewEnvelope(r, code, message, details...))
}

// NewEnvelope is the envelope of an error of r: for WriteError, and for
// an answer that holds several (one per person of a batch).
func NewEnvelope(r *http.Request, code, message string, details ...Detail) Envelope {
	return Envelope{Error: EnvelopeError{
		Code:          code,
		Message:       message,
		CorrelationID: CorrelationID(r.Context()),
		Timestamp:     time.Now().UTC().Format(time.RFC3339),
		Details:       details,
	}}
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":"server_error"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// MaxJSONBody caps request bodies of the JSON APIs.
const MaxJSONBody = 64 << 10

// BodyError is a request body that cannot be used; Code is the envelope code
// and Details name the fields.
type BodyError struct {
	Status  int
	Code    string
	Message string
	Details []Detail
}

func (e *BodyError) Error() string { return e.Message }

// DecodeJSON reads a JSON object of at most MaxJSONBody bytes into v,
// rejecting other content types, unknown fields, trailing data and
// mistyped fields with a *BodyError.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return DecodeJSONLimit(w, r, v, MaxJSONBody)
}

// DecodeJSONLimit is DecodeJSON with a body of at most limit bytes, for
// the few routes that take batches (a user import).
func DecodeJSONLimit(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &BodyError{Status: http.StatusUnsupportedMediaType, Code: CodeBadRequest, Message: "Content-Type must be application/json"}
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return &BodyError{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "body must hold one JSON object"}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &BodyError{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "body must hold one JSON object"}
	}
	return nil
}

func jsonError(err error) error {
	var maxErr *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var synErr *json.SyntaxError
	switch {
	case errors.As(err, &maxErr):
		return &BodyError{Status: http.StatusRequestEntityTooLarge, Code: CodeBadRequest, Message: fmt.Sprintf("body larger than %d bytes", maxErr.Limit)}
	case errors.Is(err, io.EOF):
		return &BodyError{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "body is empty"}
	case errors.As(err, &typeErr) && typeErr.Field == "":
		return &BodyError{Status: http.StatusBadRequest, Code: CodeValidation, Message: "invalid request body",
			Details: []Detail{{Field: "body", Message: "must be a JSON object", Code: "invalid_type"}}}
	case errors.As(err, &typeErr):
		field := typeErr.Field
		return &BodyError{Status: http.StatusBadRequest, Code: CodeValidation, Message: "invalid request body",
			Details: []Detail{{Field: field, Message: "must be of type " + typeErr.Type.String(), Code: "invalid_type"}}}
	case errors.As(err, &synErr), errors.Is(err, io.ErrUnexpectedEOF):
		return &BodyError{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "body is not valid JSON"}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &BodyError{Status: http.StatusBadRequest, Code: CodeValidation, Message: "invalid request body",
			Details: []Detail{{Field: field, Message: "unknown field", Code: "unknown_field"}}}
	default:
		return &BodyError{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "body is not valid JSON"}
	}
}

// WriteBodyError answers for an error from DecodeJSON.
func WriteBodyError(w http.ResponseWriter, r *http.Request, err error) {
	var be *BodyError
	if errors.As(err, &be) {
		WriteError(w, r, be.Status, be.Code, be.Message, be.Details...)
		return
	}
	WriteError(w, r, http.StatusBadRequest, CodeBadRequest, "invalid request body")
}

// Recover is middleware that turns a handler panic into a 500 envelope and a
// log line, so no input can kill the connection without an answer.
func Recover(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					log.Error("handler panic", "panic", fmt.Sprint(v), "path", LogPath(r.URL.Path), "correlation_id", CorrelationID(r.Context()))
					WriteError(w, r, http.StatusInternalServerError, CodeInternal, "internal error")
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// MaxLogValue caps a client-supplied value written to a log line.
const MaxLogValue = 128

// LogValue is s fit for a log line: at most MaxLogValue bytes of it, with
// the length of the rest, so a 20 KB parameter cannot make a 20 KB line.
// slog's handlers quote and escape it.
func LogValue(s string) string {
	if len(s) <= MaxLogValue {
		return s
	}
	return fmt.Sprintf("%s…(+%d bytes)", strings.ToValidUTF8(s[:MaxLogValue], ""), len(s)-MaxLogValue)
}

// SourceKey is the source address of remoteAddr (host:port) as per-address
// limits count it: an IPv4 address as it is, an IPv6 address by its /64,
// the smallest block one subscriber is usually given (one attacker would
// otherwise have 2^64 addresses).
func SourceKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// MinSecretSegment is the length from which a path segment of base64url
// characters is taken for a secret (an emailed link's token is 43) and
// kept out of log lines; a UUID (36) is not.
const MinSecretSegment = 40

// LogPath is path for a log line: LogValue, with every segment that may
// be a link's token (MinSecretSegment or more base64url characters)
// replaced by "…", so that a log never holds a token that still works.
func LogPath(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if len(s) >= MinSecretSegment && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == "" {
			segs[i] = "…"
		}
	}
	return LogValue(strings.Join(segs, "/"))
}

// SVGPolicy is the content security policy of an SVG image served by the
// provider: nothing it holds may run or load anything, and it renders
// sandboxed.
const SVGPolicy = "default-src 'none'; style-src 'unsafe-inline'; sandbox"

// SetImageHeaders sets the headers of an uploaded image (a branding logo)
// served from the provider's own origin: its exact type, no sniffing, and
// a policy under which an SVG opened on its own runs nothing. The caller
// sets caching.
func SetImageHeaders(h http.Header, contentType string) {
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	if contentType == "image/svg+xml" {
		h.Set("Content-Security-Policy", SVGPolicy)
		h.Set("Content-Disposition", "inline")
	} else {
		h.Set("Content-Security-Policy", "default-src 'none'")
	}
}
