package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oidcd/oidcd/internal/httpx"
)

// maxAnswer caps how much of an answer is read.
const maxAnswer = 16 << 20

// conn sends admin API requests to one base URL.
type conn struct {
	base    string // e.g. http://127.0.0.1:8080/admin/v1
	token   string
	timeout time.Duration
	hc      *http.Client
	stale   bool // every GET asks for ?stale=true: the node's own copy
}

func newConn(base, token string, timeout time.Duration) *conn {
	return &conn{base: base, token: token, timeout: timeout, hc: &http.Client{Timeout: timeout}}
}

// answer is a server's reply.
type answer struct {
	status int
	header http.Header
	body   []byte
	sentID string // the X-Correlation-ID sent
}

// newHTTPRequest builds the HTTP request of req with body (nil: req.body
// as JSON, if any) and the headers every call carries. It returns the
// correlation id sent.
func (c *conn) newHTTPRequest(ctx context.Context, req *request, body io.Reader) (*http.Request, string, error) {
	u := c.base + req.path
	q := req.query
	if c.stale && req.method == http.MethodGet {
		q = url.Values{"stale": {"true"}}
		for k, v := range req.query {
			q[k] = v
		}
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	contentType := ""
	if body == nil && req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, "", err
		}
		body, contentType = bytes.NewReader(b), "application/json"
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return nil, "", err
	}
	id := httpx.NewID()
	hr.Header.Set("Authorization", "Bearer "+c.token)
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set(httpx.HeaderCorrelationID, id)
	hr.Header.Set("User-Agent", "oidcd-admin")
	if contentType != "" {
		hr.Header.Set("Content-Type", contentType)
	}
	return hr, id, nil
}

// do sends req and reads the whole answer. An error means no answer.
func (c *conn) do(ctx context.Context, req *request) (*answer, error) {
	hr, id, err := c.newHTTPRequest(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readAnswer(resp, id)
}

// readAnswer reads the whole of resp (up to maxAnswer).
func readAnswer(resp *http.Response, sentID string) (*answer, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: b, sentID: sentID}, nil
}

// failed prints an error answer and returns its exit code.
func failed(stderr io.Writer, a *answer) int {
	printAPIError(stderr, a)
	if a.status == http.StatusUnauthorized {
		fmt.Fprintf(stderr, "hint: check the admin token (--token, --token-file or $%s), or sign in again: oidcd admin login\n", EnvToken)
		return ExitAuth
	}
	return ExitServerError
}

// call sends req, prints the outcome and returns the exit code.
func (c *conn) call(ctx context.Context, req *request, asJSON bool, stdout, stderr io.Writer) int {
	if req.run != nil {
		return req.run(ctx, c, asJSON, stdout, stderr)
	}
	if req.upload != "" || req.download != "" {
		return c.transfer(ctx, req, asJSON, stdout, stderr)
	}
	a, err := c.do(ctx, req)
	if err != nil {
		fmt.Fprintf(stderr, "error: %s\n", c.transportError(err))
		return ExitUnreachable
	}
	if a.status < 200 || a.status > 299 {
		return failed(stderr, a)
	}
	if asJSON {
		if len(bytes.TrimSpace(a.body)) > 0 {
			stdout.Write(prettyJSON(a.body))
		}
	} else if err := req.show(stdout, a.body); err != nil {
		fmt.Fprintf(stderr, "error: HTTP %d: %v (correlation id %s)\n", a.status, err, a.correlationID(""))
		return ExitServerError
	}
	if req.note != nil {
		if n := req.note(a.body); n != "" {
			fmt.Fprintf(stderr, "note: %s\n", n)
		}
	}
	if req.verdict != nil {
		return req.verdict(a.body)
	}
	return ExitOK
}

// transportError explains why there was no answer.
func (c *conn) transportError(err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Sprintf("no answer from %s within %s (--timeout)", c.base, c.timeout)
	}
	if errors.Is(err, context.Canceled) {
		return "interrupted"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Sprintf("cannot reach %s: %v", c.base, err)
}

func (a *answer) correlationID(fromBody string) string {
	for _, id := range []string{fromBody, a.header.Get(httpx.HeaderCorrelationID), a.sentID} {
		if id != "" {
			return clean(id)
		}
	}
	return "-"
}

// printAPIError prints an error answer: the JSON error envelope as
// `error: CODE: message (correlation id X)` and one line per detail, or,
// for any other body, the status and the body's first line.
func printAPIError(w io.Writer, a *answer) {
	var env httpx.Envelope
	if json.Unmarshal(a.body, &env) == nil && env.Error.Code != "" {
		e := env.Error
		fmt.Fprintf(w, "error: %s: %s (correlation id %s)\n", clean(e.Code), clean(e.Message), a.correlationID(e.CorrelationID))
		for _, d := range e.Details {
			if d.Field == "" {
				fmt.Fprintf(w, "  %s\n", clean(d.Message))
			} else {
				fmt.Fprintf(w, "  %s: %s\n", clean(d.Field), clean(d.Message))
			}
		}
		return
	}
	msg, _, _ := strings.Cut(strings.TrimSpace(string(a.body)), "\n")
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(a.status)
	}
	fmt.Fprintf(w, "error: HTTP %d: %s (correlation id %s)\n", a.status, clean(msg), a.correlationID(""))
}
