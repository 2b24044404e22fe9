package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
)

// column is one table column; the first key present in a row is shown.
type column struct {
	head string
	keys []string
}

func col(head string, keys ...string) column { return column{head: head, keys: keys} }

func (c column) cell(row map[string]any) string {
	for _, k := range c.keys {
		if v, ok := row[k]; ok && v != nil {
			return text(v)
		}
	}
	return "-"
}

// view says how one kind of resource is shown: as table rows, or, for one
// resource with many fields, as a field list (fields set).
type view struct {
	plural string
	cols   []column
	fields []string // one resource as "field value" lines, in this order, then any others
	// prep, when set, adds computed cells to a row before it is shown.
	prep func(row map[string]any)
}

var (
	orgTable = view{plural: "organizations", cols: []column{
		col("ID", "id"), col("SLUG", "slug"), col("NAME", "name"), col("STATUS", "status"), col("REGISTRATION", registrationMark),
	}, prep: registrationCell}
	invitationTable = view{plural: "invitations", cols: []column{
		col("ID", "id"), col("EMAIL", "email"), col("ORG", "organization_id"), col("STATUS", "status"),
		col("EXPIRES_AT", "expires_at"), col("ACCEPTED_AT", "accepted_at"),
	}}
	userTable = view{plural: "users", cols: []column{
		col("ID", "id"), col("EMAIL", "email"), col("VERIFIED", "email_verified"), col("PHONE", "phone"), col("PASSWORD", "password_scheme"),
	}}
	directoryTable = view{plural: "directories", cols: []column{
		col("ID", "id"), col("NAME", "name"), col("URL", "url"), col("SYNC", "sync_interval"), col("LAST_SYNC", "last_sync"),
	}}
	membershipTable = view{plural: "memberships", cols: []column{
		col("ID", "id"), col("USER", "user_id"), col("ORG", "org_id", "organization_id"), col("STATUS", "status"),
	}}
	clientTable = view{plural: "clients", cols: []column{
		col("CLIENT_ID", "client_id", "id"), col("NAME", "name"), col("TYPE", "type"), col("ORG", "organization_id"),
		col("APP", "application_type"), col("MULTI_ORG", "multi_organization"), col("SUSPENDED", "suspended"),
	}}
	clientView = view{plural: "clients", cols: clientTable.cols, fields: []string{
		"client_id", "name", "type", "application_type", "organization_id", "redirect_uris", "web_origins",
		"scopes", "multi_organization", "organizations", "access_token_ttl", "backchannel_logout_uri", "skip_consent", "suspended", "rate_limit",
	}, prep: originsCell}
	keyTable = view{plural: "keys", cols: []column{
		col("KID", "kid"), col("STATE", "state"), col("CREATED_AT", "created_at"),
		col("ACTIVATES_AT", "activates_at"), col("RETIRED_AT", "retired_at"),
	}}
	grantTable = view{plural: "grants", cols: []column{
		col("ID", "id"), col("USER", "user_id"), col("EMAIL", emailMark), col("ROLE", "role"), col("ORG", "organization_id"), col("CREATED_AT", "created_at"),
	}}
	apiKeyTable = view{plural: "API keys", cols: []column{
		col("ID", "id"), col("NAME", "name"), col("ROLE", "role"), col("ORG", "organization_id"), col("MADE_BY", makerMark),
		col("EXPIRES_AT", "expires_at"),
	}, prep: makerCell}
	apiKeyView = view{plural: "API keys", cols: apiKeyTable.cols, fields: []string{
		"id", "name", "role", "organization_id", "created_by", "expires_at", "key",
	}}
	lockoutTable = view{plural: "lockouts", cols: []column{
		col("KEY", "key"), col("KIND", "kind"), col("USER", "person", "user_id"), col("FAILURES", "count"), col("LOCKED_UNTIL", "locked_until"),
	}}
	passkeyTable = []column{col("PASSKEY", "id"), col("NAME", "name"), col("CREATED_AT", "created_at"), col("LAST_USED_AT", "last_used_at")}
	memberTable  = []column{
		col("ID", "id"), col("RAFT_ADDR", "raft_addr"), col("GOSSIP_ADDR", "gossip_addr"), col("HTTP_ADDR", "http_addr"),
		col("STATE", "state"), col("VOTER", "voter"), col("LEADER", leaderMark),
		col("APPLIED", "applied_index"), col("LAG", "applied_lag"), col("CONTACT_MS", "last_contact_ms"),
		col("VERSION", "version"), col("FORMAT", "state_format"),
	}
)

// leaderMark is a key that no server field uses; showCluster sets it.
const leaderMark = "\x00leader"

// registrationMark is a key that no server field uses: an organization's
// registration in a word, "on" or "off", with its domains.
const registrationMark = "\x00registration"

// makerMark is a key that no server field uses: who made an API key in
// a word and an id, "person <sub>", "api_key <id>" or "token".
const makerMark = "\x00maker"

// originsCell shows a client's web_origins in one field: the list, or
// "none", marked "(default)" when the registration names none and the
// list follows its redirect URIs (web_origins_default, not shown apart).
// An older server sends neither: nothing changes.
func originsCell(obj map[string]any) {
	list, ok := obj["web_origins"].([]any)
	if !ok {
		return
	}
	def, _ := obj["web_origins_default"].(bool)
	delete(obj, "web_origins_default")
	if len(list) == 0 {
		list = []any{"none"}
	}
	if def {
		list = append(list[:len(list):len(list)], "(default: from the redirect URIs)")
	}
	obj["web_origins"] = list
}

// makerCell sets makerMark from the row's created_by object (none from an
// older server: the cell shows "-").
func makerCell(row map[string]any) {
	m, ok := row["created_by"].(map[string]any)
	if !ok {
		return
	}
	kind, _ := m["kind"].(string)
	cell := kind
	for _, k := range []string{"sub", "id"} {
		if id, _ := m[k].(string); id != "" {
			cell += " " + id
		}
	}
	row[makerMark] = cell
}

// registrationCell sets registrationMark from the row's registration
// object (none from an older server: the cell shows "-").
func registrationCell(row map[string]any) {
	reg, ok := row["registration"].(map[string]any)
	if !ok {
		return
	}
	cell := "off"
	if on, _ := reg["enabled"].(bool); on {
		cell = "on"
	}
	if d := text(reg["email_domains"]); d != "-" {
		cell += " (" + d + ")"
	}
	row[registrationMark] = cell
}

// one shows a single resource.
func (v view) one(w io.Writer, body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		_, err := fmt.Fprintln(w, "done")
		return err
	}
	obj, err := decodeObject(body)
	if err != nil {
		return err
	}
	if v.prep != nil {
		v.prep(obj)
	}
	if v.fields == nil {
		return writeTable(w, v.cols, []map[string]any{obj})
	}
	return writeFields(w, obj, v.fields)
}

// list shows a `{data, pagination}` answer with a footer for the pagination.
func (v view) list(w io.Writer, body []byte) error {
	var page struct {
		Data       []map[string]any `json:"data"`
		Pagination *struct {
			Page       int64 `json:"page"`
			PageSize   int64 `json:"page_size"`
			TotalItems int64 `json:"total_items"`
			TotalPages int64 `json:"total_pages"`
			HasNext    bool  `json:"has_next"`
		} `json:"pagination"`
	}
	if err := decode(body, &page); err != nil {
		return err
	}
	if v.prep != nil {
		for _, row := range page.Data {
			v.prep(row)
		}
	}
	if len(page.Data) == 0 {
		fmt.Fprintf(w, "no %s\n", v.plural)
	} else if err := writeTable(w, v.cols, page.Data); err != nil {
		return err
	}
	if p := page.Pagination; p != nil {
		pages := max(p.TotalPages, 1)
		items := "items"
		if p.TotalItems == 1 {
			items = "item"
		}
		fmt.Fprintf(w, "page %d/%d, %d %s", p.Page, pages, p.TotalItems, items)
		if p.HasNext {
			fmt.Fprintf(w, " (next: --page %d)", p.Page+1)
		}
		fmt.Fprintln(w)
	}
	return nil
}

func writeTable(w io.Writer, cols []column, rows []map[string]any) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	heads := make([]string, len(cols))
	for i, c := range cols {
		heads[i] = c.head
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	for _, row := range rows {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = c.cell(row)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// writeFields prints obj as "field  value" lines: the fields of order
// first, then any others sorted, and a client_secret last, apart.
func writeFields(w io.Writer, obj map[string]any, order []string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	seen := map[string]bool{"client_secret": true}
	line := func(k string) {
		seen[k] = true
		v, ok := obj[k]
		if !ok {
			return
		}
		if list, isList := v.([]any); isList && len(list) > 1 {
			for i, item := range list {
				if i == 0 {
					fmt.Fprintf(tw, "%s\t%s\n", k, text(item))
				} else {
					fmt.Fprintf(tw, "\t%s\n", text(item))
				}
			}
			return
		}
		fmt.Fprintf(tw, "%s\t%s\n", k, text(v))
	}
	for _, k := range order {
		line(k)
	}
	var rest []string
	for k := range obj {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		line(k)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s, _ := obj["client_secret"].(string); s != "" {
		_, err := fmt.Fprintf(w, "\nclient_secret: %s\n", clean(s))
		return err
	}
	return nil
}

func showTOTP(w io.Writer, body []byte) error {
	obj, err := decodeObject(body)
	if err != nil {
		return err
	}
	return writeFields(w, obj, []string{"secret", "uri"})
}

// showFactors prints what a user has enrolled, and the passkeys.
func showFactors(w io.Writer, body []byte) error {
	var f struct {
		TOTP     any              `json:"totp"`
		Left     any              `json:"recovery_codes_left"`
		Passkeys []map[string]any `json:"passkeys"`
	}
	if err := decode(body, &f); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "authenticator app\t%s\n", text(f.TOTP))
	fmt.Fprintf(tw, "recovery codes left\t%s\n", text(f.Left))
	fmt.Fprintf(tw, "passkeys\t%d\n", len(f.Passkeys))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(f.Passkeys) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return writeTable(w, passkeyTable, f.Passkeys)
}

func showCodes(w io.Writer, body []byte) error {
	var r struct {
		Codes []string `json:"codes"`
	}
	if err := decode(body, &r); err != nil {
		return err
	}
	for _, c := range r.Codes {
		if _, err := fmt.Fprintln(w, clean(c)); err != nil {
			return err
		}
	}
	return nil
}

func showCluster(w io.Writer, body []byte) error {
	var c struct {
		Leader      any              `json:"leader"`
		Members     []map[string]any `json:"members"`
		StateFormat *int             `json:"state_format"` // nil: a server before the state-format gate
		Mixed       bool             `json:"mixed"`
	}
	if err := decode(body, &c); err != nil {
		return err
	}
	leader := ""
	if c.Leader != nil {
		leader = text(c.Leader)
	}
	if leader == "" || leader == "-" {
		fmt.Fprintln(w, "leader: none")
		leader = ""
	} else {
		fmt.Fprintf(w, "leader: %s\n", leader)
	}
	if c.StateFormat != nil {
		fmt.Fprintf(w, "state format: %d%s\n", *c.StateFormat, mixedMark(c.Mixed))
	}
	for _, m := range c.Members {
		m[leaderMark] = false
		if leader != "" {
			for _, k := range []string{"id", "raft_addr", "http_addr", "gossip_addr"} {
				if s, _ := m[k].(string); s == leader {
					m[leaderMark] = true
				}
			}
		}
	}
	if len(c.Members) == 0 {
		_, err := fmt.Fprintln(w, "no members")
		return err
	}
	if err := writeTable(w, memberTable, c.Members); err != nil {
		return err
	}
	if c.Mixed && c.StateFormat != nil {
		_, err := fmt.Fprint(w, "\n"+mixedNote(*c.StateFormat, c.Members))
		return err
	}
	return nil
}

// mixedMark follows the cluster's state format when its members run
// different versions.
func mixedMark(mixed bool) string {
	if mixed {
		return ", mixed versions (a rolling upgrade is under way)"
	}
	return ""
}

// mixedNote explains a cluster of mixed versions (GET /cluster's and GET
// /status's mixed): who runs what, the format the cluster runs, and what
// waits for whom (docs/operators/upgrades.md).
func mixedNote(format int, members []map[string]any) string {
	newest := format
	for _, m := range members {
		newest = max(newest, intCell(m["state_format"]))
	}
	var runs, behind []string
	for _, m := range members {
		id := text(m["id"])
		runs = append(runs, id+" "+text(m["version"]))
		if intCell(m["state_format"]) < newest {
			behind = append(behind, id)
		}
	}
	s := "Mixed versions (" + strings.Join(runs, ", ") + "): a rolling upgrade is under way. "
	switch {
	case newest > format && len(behind) > 0:
		s += fmt.Sprintf("The cluster runs state format %d: writes that need state format %d wait until every node runs it "+
			"(they are refused with 409 CONFLICT until then; upgrade %s). Sign-ins, tokens and every other write go on as usual.",
			format, newest, strings.Join(behind, ", "))
	case newest > format:
		s += fmt.Sprintf("Every node applies state format %d: the leader raises the cluster's from %d shortly.", newest, format)
	default:
		s += fmt.Sprintf("Every node applies the cluster's state format %d: no write waits.", format)
	}
	return wrapText(s, 76)
}

// intCell is a JSON number of a decoded row as an int (0 when it is none).
func intCell(v any) int {
	n, ok := v.(json.Number)
	if !ok {
		return 0
	}
	i, err := n.Int64()
	if err != nil {
		return 0
	}
	return int(i)
}

// wrapText breaks s into lines of at most width columns at spaces, each
// line ended by a newline.
func wrapText(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(s) {
		switch {
		case n == 0:
		case n+1+len(word) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	b.WriteByte('\n')
	return b.String()
}

// text formats one JSON value for a table cell: "-" for nothing, lists
// comma-separated, control characters (terminal escapes) replaced.
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		if v == "" {
			return "-"
		}
		return clean(v)
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return v.String()
	case []any:
		if len(v) == 0 {
			return "-"
		}
		parts := make([]string, len(v))
		for i, item := range v {
			parts[i] = text(item)
		}
		return strings.Join(parts, ",")
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "?"
		}
		return clean(string(b))
	}
}

// clean replaces control characters so that a server-sent value cannot
// break the table or drive the terminal.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

func decode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the answer is not the expected JSON: %w", err)
	}
	return nil
}

func decodeObject(body []byte) (map[string]any, error) {
	var obj map[string]any
	if err := decode(body, &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, fmt.Errorf("the answer is not a JSON object")
	}
	return obj, nil
}

// prettyJSON indents a JSON answer, keeping the server's key order, and
// ends it with a newline. A body that is not JSON is returned as it is.
func prettyJSON(body []byte) []byte {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		return body
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}
