package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/oidcd/oidcd/internal/httpx"
)

// importRow is one person of an import file, as POST /users/import takes
// them (docs/operators/import.md).
type importRow struct {
	Email         string   `json:"email"`
	EmailVerified bool     `json:"email_verified,omitempty"`
	Phone         string   `json:"phone,omitempty"`
	PasswordHash  string   `json:"password_hash,omitempty"`
	Organizations []string `json:"organizations,omitempty"`
}

// Batch sizes of user import: the server takes at most maxImportBatch
// people a request (fsm.MaxImportBatch).
const (
	defaultImportBatch = 500
	maxImportBatch     = 1000
)

// importProgress is what the progress file keeps between runs: which file
// (by content) and how many of its rows the server has acknowledged.
type importProgress struct {
	File    string `json:"file"`
	SHA256  string `json:"sha256"`
	Done    int    `json:"rows_done"`
	Created int    `json:"created"`
	Exists  int    `json:"exists"`
	Failed  int    `json:"failed"`
}

// importSummary is the --json output of user import.
type importSummary struct {
	Rows    int              `json:"rows"`
	Created int              `json:"created"`
	Exists  int              `json:"exists"`
	Failed  int              `json:"failed"`
	Errors  []importRowError `json:"errors"`
}

type importRowError struct {
	Row   int                 `json:"row"` // 1-based, in the file's order
	Email string              `json:"email"`
	Error httpx.EnvelopeError `json:"error"`
}

func userImport(fs *flag.FlagSet) func(in *inv) (*request, error) {
	format := fs.String("format", "", "`json`, jsonl or csv (default: from the file's extension)")
	batch := fs.Int("batch", defaultImportBatch, "people per request, 1 to 1000 (each request is one replicated write)")
	progressFile := fs.String("progress-file", "", "where to keep the progress (default: FILE.progress)")
	restart := fs.Bool("restart", false, "ignore a progress file and start from the first row")
	return func(in *inv) (*request, error) {
		file := in.args[0]
		f := *format
		if f == "" {
			switch strings.ToLower(filepath.Ext(file)) {
			case ".json":
				f = "json"
			case ".jsonl", ".ndjson":
				f = "jsonl"
			case ".csv":
				f = "csv"
			default:
				return nil, fmt.Errorf("cannot tell the format of %s from its extension; pass --format json, jsonl or csv", file)
			}
		}
		if f != "json" && f != "jsonl" && f != "csv" {
			return nil, fmt.Errorf("--format: %q is not json, jsonl or csv", f)
		}
		if *batch < 1 || *batch > maxImportBatch {
			return nil, fmt.Errorf("--batch: %d is not between 1 and %d", *batch, maxImportBatch)
		}
		pf := *progressFile
		if pf == "" {
			pf = file + ".progress"
		}
		imp := &importer{file: file, format: f, batch: *batch, progressFile: pf, restart: *restart}
		return &request{run: imp.run}, nil
	}
}

// importer sends the rows of a file in batches, keeping a progress file
// so that a run cut short resumes where the server's answers stopped.
// Rows sent twice are harmless: the import is idempotent by address (the
// second time they are "exists").
type importer struct {
	file, format string
	batch        int
	progressFile string
	restart      bool
}

func (imp *importer) run(ctx context.Context, c *conn, asJSON bool, stdout, stderr io.Writer) int {
	sum, err := fileSHA256(imp.file)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return ExitUsage
	}
	// A first pass reads the whole file: a syntax error in its last row
	// is reported before anything is sent, and the progress has a total.
	total := 0
	if err := imp.rows(func(int, importRow) error { total++; return nil }); err != nil {
		fmt.Fprintf(stderr, "error: %v (nothing was sent)\n", err)
		return ExitUsage
	}
	prog := importProgress{File: filepath.Base(imp.file), SHA256: sum}
	if !imp.restart {
		switch old, err := readProgress(imp.progressFile); {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			fmt.Fprintf(stderr, "error: %v; remove it or pass --restart\n", err)
			return ExitUsage
		case old.SHA256 != sum:
			fmt.Fprintf(stderr, "error: %s records another version of %s (the file changed since); remove it or pass --restart\n", imp.progressFile, imp.file)
			return ExitUsage
		default:
			prog = old
			fmt.Fprintf(stderr, "resuming after row %d of %d (from %s; --restart starts over)\n", prog.Done, total, imp.progressFile)
		}
	}
	out := importSummary{Errors: []importRowError{}}
	tty := isTerminal(stderr)
	var pending []importRow
	pendingFrom := 0 // row index of pending[0]
	send := func() error {
		if len(pending) == 0 {
			return nil
		}
		a, err := c.do(ctx, &request{method: http.MethodPost, path: "/users/import", body: map[string]any{"users": pending}})
		if err != nil {
			return fmt.Errorf("%s", c.transportError(err))
		}
		if a.status != http.StatusOK {
			failed(stderr, a)
			return errAnswered
		}
		var ans struct {
			Data []struct {
				Index  int                  `json:"index"`
				Status string               `json:"status"`
				Error  *httpx.EnvelopeError `json:"error"`
			} `json:"data"`
			Created, Exists, Failed int
		}
		if err := json.Unmarshal(a.body, &ans); err != nil || len(ans.Data) != len(pending) {
			return fmt.Errorf("unexpected answer to a batch of %d: %.200s", len(pending), a.body)
		}
		for _, d := range ans.Data {
			if d.Error == nil || d.Index < 0 || d.Index >= len(pending) {
				continue
			}
			re := importRowError{Row: pendingFrom + d.Index + 1, Email: pending[d.Index].Email, Error: *d.Error}
			out.Errors = append(out.Errors, re)
			if !asJSON {
				printRowError(stderr, re, tty)
			}
		}
		prog.Done += len(pending)
		prog.Created += ans.Created
		prog.Exists += ans.Exists
		prog.Failed += ans.Failed
		if err := writeProgress(imp.progressFile, prog); err != nil {
			fmt.Fprintf(stderr, "warning: %v (a later run cannot resume from here)\n", err)
		}
		progressLine(stderr, tty, prog, total)
		pending, pendingFrom = pending[:0], prog.Done
		return nil
	}
	pendingFrom = prog.Done
	err = imp.rows(func(i int, r importRow) error {
		if i < prog.Done {
			return nil
		}
		pending = append(pending, r)
		if len(pending) == imp.batch {
			return send()
		}
		return nil
	})
	if err == nil {
		err = send()
	}
	if tty {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		if !errors.Is(err, errAnswered) {
			fmt.Fprintf(stderr, "error: %v\n", err)
		}
		fmt.Fprintf(stderr, "stopped after row %d of %d; run the same command again to resume\n", prog.Done, total)
		if errors.Is(err, errAnswered) {
			return ExitServerError
		}
		return ExitUnreachable
	}
	os.Remove(imp.progressFile)
	out.Rows, out.Created, out.Exists, out.Failed = total, prog.Created, prog.Exists, prog.Failed
	if asJSON {
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, "imported %s: %d created, %d already there, %d failed\n", plural(total, "row", "rows"), out.Created, out.Exists, out.Failed)
	}
	if out.Failed > 0 {
		if !asJSON {
			fmt.Fprintf(stderr, "%s not imported: fix the rows above and run again (the others are then reported as already there)\n",
				plural(out.Failed, "person was", "people were"))
		}
		return ExitServerError
	}
	return ExitOK
}

// errAnswered: the server refused a batch and its error was printed.
var errAnswered = errors.New("the server refused the batch")

func printRowError(w io.Writer, re importRowError, tty bool) {
	if tty {
		fmt.Fprint(w, "\r\033[K")
	}
	msg := clean(re.Error.Message)
	for _, d := range re.Error.Details {
		msg = clean(d.Field) + ": " + clean(d.Message)
		break
	}
	fmt.Fprintf(w, "row %d (%s): %s\n", re.Row, clean(re.Email), msg)
}

func progressLine(w io.Writer, tty bool, p importProgress, total int) {
	pct := 100
	if total > 0 {
		pct = p.Done * 100 / total
	}
	line := fmt.Sprintf("%d/%d rows (%d%%): %d created, %d already there, %d failed", p.Done, total, pct, p.Created, p.Exists, p.Failed)
	if tty {
		fmt.Fprint(w, "\r\033[K"+line)
		return
	}
	fmt.Fprintln(w, line)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func readProgress(path string) (importProgress, error) {
	var p importProgress
	b, err := os.ReadFile(path)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil || p.SHA256 == "" || p.Done < 0 {
		return p, fmt.Errorf("%s is not a progress file of user import", path)
	}
	return p, nil
}

// writeProgress replaces the progress file atomically.
func writeProgress(path string, p importProgress) error {
	b, _ := json.Marshal(p)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// rows calls fn with each row of the file, in order (i from 0), and stops
// at the first error, which names the row or line.
func (imp *importer) rows(fn func(i int, r importRow) error) error {
	f, err := os.Open(imp.file)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	switch imp.format {
	case "csv":
		return csvRows(br, fn)
	case "jsonl":
		return jsonlRows(br, fn)
	}
	return jsonRows(br, fn)
}

// jsonRows reads an array of people, or an object {"users": [...]} (the
// request body's shape), one element at a time.
func jsonRows(r io.Reader, fn func(int, importRow) error) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if tok == json.Delim('{') {
		key, err := dec.Token()
		if err != nil || key != "users" {
			return errors.New(`a JSON file holds an array of people or {"users": [...]}`)
		}
		tok, err = dec.Token()
		if err != nil {
			return fmt.Errorf("users: %v", err)
		}
	}
	if tok != json.Delim('[') {
		return errors.New(`a JSON file holds an array of people or {"users": [...]}`)
	}
	for i := 0; dec.More(); i++ {
		var row importRow
		if err := dec.Decode(&row); err != nil {
			return fmt.Errorf("person %d: %v", i+1, err)
		}
		if err := fn(i, row); err != nil {
			return err
		}
	}
	return nil
}

// jsonlRows reads one JSON object a line; blank lines are skipped.
func jsonlRows(r *bufio.Reader, fn func(int, importRow) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	i := 0
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if strings.TrimSpace(string(b)) == "" {
			continue
		}
		var row importRow
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&row); err != nil {
			return fmt.Errorf("line %d: %v", line, err)
		}
		if err := fn(i, row); err != nil {
			return err
		}
		i++
	}
	return sc.Err()
}

// csvColumns are the columns a CSV file may have, in any order; its first
// line names them. organizations holds ids separated by ";" or spaces.
var csvColumns = []string{"email", "email_verified", "phone", "password_hash", "organizations"}

func csvRows(r io.Reader, fn func(int, importRow) error) error {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return fmt.Errorf("CSV header: %v", err)
	}
	col := map[string]int{}
	for i, name := range head {
		name = strings.TrimSpace(strings.TrimPrefix(name, "\ufeff"))
		known := false
		for _, c := range csvColumns {
			known = known || c == name
		}
		if !known {
			return fmt.Errorf("CSV header: unknown column %q (known: %s)", name, strings.Join(csvColumns, ", "))
		}
		col[name] = i
	}
	if _, ok := col["email"]; !ok {
		return errors.New("CSV header: no email column")
	}
	get := func(rec []string, name string) string {
		if i, ok := col[name]; ok {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	for i := 0; ; i++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, csv.ErrFieldCount) {
			return fmt.Errorf("CSV: %v (an argon2id hash holds commas: quote it, \"$argon2id$v=19$m=...\")", err)
		}
		if err != nil {
			return fmt.Errorf("CSV: %v", err)
		}
		row := importRow{Email: get(rec, "email"), Phone: get(rec, "phone"), PasswordHash: get(rec, "password_hash")}
		if v := get(rec, "email_verified"); v != "" {
			if row.EmailVerified, err = strconv.ParseBool(v); err != nil {
				line, _ := cr.FieldPos(col["email_verified"])
				return fmt.Errorf("CSV line %d: email_verified %q is not true or false", line, v)
			}
		}
		row.Organizations = strings.FieldsFunc(get(rec, "organizations"), func(r rune) bool { return r == ';' || r == ' ' })
		if err := fn(i, row); err != nil {
			return err
		}
	}
}

// plural is "1 row" or "n rows".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
