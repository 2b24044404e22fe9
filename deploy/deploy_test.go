package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"go.yaml.in/yaml/v3"
	"golang.org/x/oauth2"

	"github.com/oidcd/oidcd/node"
	"github.com/oidcd/oidcd/testcluster"
)

// rulesFile is the shape of a Prometheus rule file, as far as it is checked.
type rulesFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// alertExprs reads deploy/prometheus/alerts.yml strictly and checks each
// rule's shape; it returns the expressions by alert name.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf rulesFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	out := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
				t.Errorf("alerts.yml: a rule without alert or expr: %+v", r)
			}
			if _, dup := out[r.Alert]; dup {
				t.Errorf("alerts.yml: alert %s twice", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("alert %s: no summary", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if err := balanced(r.Expr); err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
			}
			out[r.Alert] = r.Expr
		}
	}
	// The rules the issue asks for.
	for _, want := range []string{"OidcdNoLeader", "OidcdApplyLatencyHigh", "OidcdBackchannelDeliveryAbandoned", "OidcdKeyRotationOverdue", "OidcdDataDirGrowth", "OidcdDiskWillFill"} {
		if _, ok := out[want]; !ok {
			t.Errorf("alerts.yml has no %s", want)
		}
	}
	return out
}

// dashboardExprs reads deploy/grafana/oidcd.json and returns every PromQL
// expression of its panels, and the metrics its variables query.
func dashboardExprs(t *testing.T) (exprs []string, varMetrics []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("grafana", "oidcd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string           `json:"title"`
		UID        string           `json:"uid"`
		Panels     []map[string]any `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("oidcd.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("oidcd.json: title %q uid %q with %d panels", d.Title, d.UID, len(d.Panels))
	}
	ids := map[float64]bool{}
	for _, p := range d.Panels {
		id, _ := p["id"].(float64)
		if ids[id] {
			t.Errorf("panel id %v twice", id)
		}
		ids[id] = true
		targets, _ := p["targets"].([]any)
		if p["type"] != "row" && len(targets) == 0 {
			t.Errorf("panel %q has no query", p["title"])
		}
		for _, tg := range targets {
			e, _ := tg.(map[string]any)["expr"].(string)
			if err := balanced(e); e == "" || err != nil {
				t.Errorf("panel %q: expr %q: %v", p["title"], e, err)
			}
			exprs = append(exprs, e)
		}
	}
	lv := regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	for _, v := range d.Templating.List {
		if m := lv.FindStringSubmatch(v.Definition); m != nil {
			varMetrics = append(varMetrics, m[1])
		}
	}
	return exprs, varMetrics
}

// balanced checks that brackets and quotes of a PromQL expression pair up.
func balanced(expr string) error {
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	quote := rune(0)
	for _, r := range expr {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return errUnbalanced
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 || quote != 0 {
		return errUnbalanced
	}
	return nil
}

type constErr string

func (e constErr) Error() string { return string(e) }

const errUnbalanced = constErr("unbalanced brackets or quotes")

// promqlWords are the PromQL keywords and aggregation operators that look
// like metric names.
var promqlWords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "bool": true, "offset": true, "inf": true, "nan": true, "atan2": true,
}

// labelListWords are followed by a parenthesised list of label names.
var labelListWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// metricNames returns the metric names a PromQL expression selects: the
// identifiers outside strings, label matchers and ranges that are neither
// function calls, keywords, label lists nor numbers.
func metricNames(expr string) []string {
	var names []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	skipTo := func(i int, open, close byte) int { // i at open; returns the index after the matching close
		depth := 0
		for ; i < len(expr); i++ {
			switch expr[i] {
			case '"', '\'', '`':
				q := expr[i]
				for i++; i < len(expr) && expr[i] != q; i++ {
					if expr[i] == '\\' {
						i++
					}
				}
			case open:
				depth++
			case close:
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '{':
			i = skipTo(i, '{', '}')
		case c == '[':
			i = skipTo(i, '[', ']')
		case c == '"' || c == '\'' || c == '`':
			for i++; i < len(expr) && expr[i] != c; i++ {
				if expr[i] == '\\' {
					i++
				}
			}
			i++
		case c >= '0' && c <= '9' || c == '.':
			// A number: 0.5, 1e9, 0x1f, 2.5e-3.
			for i++; i < len(expr); i++ {
				d := expr[i]
				exp := (d == '+' || d == '-') && (expr[i-1] == 'e' || expr[i-1] == 'E')
				if !isPart(d) && d != '.' && !exp {
					break
				}
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			switch {
			case labelListWords[word]:
				if k < len(expr) && expr[k] == '(' {
					j = skipTo(k, '(', ')')
				}
			case promqlWords[strings.ToLower(word)]:
			case k < len(expr) && expr[k] == '(':
				// a function call
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`up{job="oidcd"} == 0`, []string{"up"}},
		{`histogram_quantile(0.99, sum by (job, instance, le) (rate(oidcd_raft_apply_duration_seconds_bucket[5m]))) > 0.5`,
			[]string{"oidcd_raft_apply_duration_seconds_bucket"}},
		{`oidcd_signing_keys{state="active"} == 0 and on (instance) oidcd_raft_has_leader == 1`, []string{"oidcd_signing_keys", "oidcd_raft_has_leader"}},
		{`predict_linear(oidcd_data_dir_free_bytes[6h], 24 * 3600) < 0`, []string{"oidcd_data_dir_free_bytes"}},
		{`sum by (method) (rate(oidcd_authentications_total{job=~"$job", instance=~"$instance"}[5m]))`, []string{"oidcd_authentications_total"}},
		{`oidcd_data_dir_bytes > 1e8 and x:y:rate5m offset 5m`, []string{"oidcd_data_dir_bytes", "x:y:rate5m"}},
		{`(a - b) > 1000`, []string{"a", "b"}},
		{`label_replace(a, "dst", "$1", "src", "(.*)")`, []string{"a"}},
	}
	for _, c := range cases {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// builtin are series that Prometheus itself makes, not the node.
var builtin = map[string]bool{"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true}

// TestDashboardAndAlertsNameOnlyExportedMetrics starts a real node, signs
// a person in through it (so the metrics with labels have values), scrapes
// /metrics and checks every metric the dashboard and the alert rules name,
// and the metrics list of docs/metrics.md.
func TestDashboardAndAlertsNameOnlyExportedMetrics(t *testing.T) {
	alerts := alertExprs(t)
	panelExprs, varMetrics := dashboardExprs(t)

	c := testcluster.New(t, testcluster.Options{Demo: true, Configure: func(_ int, cfg *node.Config) {
		cfg.RateLimit = "3/60s"
	}})
	exercise(t, c)
	samples, families := scrape(t, c.URL(0)+"/metrics")

	check := func(where, expr string) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", where, expr)
		}
		for _, n := range names {
			if !samples[n] && !builtin[n] {
				t.Errorf("%s: metric %s is not exported by a node (expr %q)", where, n, expr)
			}
		}
	}
	for name, e := range alerts {
		check("alert "+name, e)
	}
	for _, e := range panelExprs {
		check("dashboard", e)
	}
	for _, m := range varMetrics {
		if !samples[m] {
			t.Errorf("dashboard variable: metric %s is not exported", m)
		}
	}

	// docs/metrics.md lists every oidcd_ metric the node exports, and each
	// metric it lists is exported or declared in the source (a metric with
	// labels appears once it has a value).
	doc, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(oidcd_[a-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	var missing []string
	for f := range families {
		if strings.HasPrefix(f, "oidcd_") && !documented[f] {
			missing = append(missing, f)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/metrics.md does not list %s", strings.Join(missing, ", "))
	}
	source := goSource(t)
	for m := range documented {
		if !families[m] && !strings.Contains(source, `"`+m+`"`) {
			t.Errorf("docs/metrics.md lists %s, which no node exports and no code declares", m)
		}
	}
}

// exercise signs the demo person in with the demo client the way an
// application does, then makes a few failing and rate-limited token
// requests and a refused userinfo call, so the metrics with labels exist.
func exercise(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.Node(0).FSM().State().Client(node.DemoClientID); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the demo client was not seeded within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	p, err := gooidc.NewProvider(ctx, c.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	cb := node.DemoRedirectURI
	oc := oauth2.Config{ClientID: node.DemoClientID, Endpoint: p.Endpoint(), RedirectURL: cb, Scopes: []string{gooidc.ScopeOpenID, "email"}}
	b := testcluster.NewBrowser(t)
	verifier := oauth2.GenerateVerifier()
	base := c.Issuer()
	page := b.Follow(b.Get(oc.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier), gooidc.Nonce("nonce-0123456789"))), base)
	for i := 0; i < 4 && page.Location() == ""; i++ {
		switch {
		case strings.Contains(page.Body, `name="password"`):
			page = b.Submit(page, map[string]string{"email": node.DemoEmail, "password": node.DemoPassword}, "method", "password")
		case strings.Contains(page.Body, `value="allow"`):
			page = b.Submit(page, nil, "decision", "allow")
		default:
			t.Fatalf("unexpected page %d at %s:\n%s", page.Status, page.URL, page.Body)
		}
		page = b.Follow(page, base)
	}
	loc, err := url.Parse(page.Location())
	if err != nil || !strings.HasPrefix(page.Location(), cb) {
		t.Fatalf("sign-in ended at %d %q, want a redirect to %s", page.Status, page.Location(), cb)
	}
	tok, err := oc.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if _, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err != nil {
		t.Fatalf("userinfo: %v", err)
	}
	hc := c.Client()
	req, _ := http.NewRequest("GET", c.URL(0)+"/userinfo", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	if resp, err := hc.Do(req); err == nil {
		resp.Body.Close()
	}
	// A used code, then the same again until the rate limit answers 429.
	limited := false
	for i := 0; i < 6 && !limited; i++ {
		resp, err := hc.PostForm(c.URL(0)+"/oauth2/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {node.DemoClientID},
			"code": {loc.Query().Get("code")}, "redirect_uri": {cb}, "code_verifier": {verifier}})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		limited = resp.StatusCode == http.StatusTooManyRequests
	}
	if !limited {
		t.Fatal("the token endpoint never answered 429 with --rate-limit 3/60s")
	}
	// A directory nobody answers at: the leader's first sync fails, so the
	// sync metrics have a series.
	body, _ := json.Marshal(map[string]any{"name": "Nowhere", "url": "ldaps://127.0.0.1:1", "bind_dn": "cn=x,dc=example",
		"bind_password": "x", "user_base": "dc=example", "user_filter": "(mail=%s)", "id_attribute": "entryUUID", "sync_interval": "1m"})
	req, _ = http.NewRequest("POST", c.URL(0)+"/admin/v1/directories", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testcluster.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /directories: %v %v", resp, err)
	}
	resp.Body.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if samples, _ := scrape(t, c.URL(0)+"/metrics"); samples["oidcd_directory_syncs_total"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no directory sync within 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape fetches a /metrics page and returns its sample names and its
// metric family names (from # TYPE lines).
func scrape(t *testing.T, u string) (samples, families map[string]bool) {
	samples, families, _ = scrapeValues(t, u)
	return samples, families
}

// scrapeValues also returns each series' value, keyed by the series as
// written (name and labels).
func scrapeValues(t *testing.T, u string) (samples, families map[string]bool, values map[string]float64) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	samples, families, values = map[string]bool{}, map[string]bool{}, map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "# TYPE "):
			if f := strings.Fields(l); len(f) >= 3 {
				families[f[2]] = true
			}
		case l == "" || strings.HasPrefix(l, "#"):
		default:
			name := l
			if i := strings.IndexAny(l, "{ "); i >= 0 {
				name = l[:i]
			}
			samples[name] = true
			if i := strings.LastIndexByte(l, ' '); i > 0 {
				if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
					values[l[:i]] = v
				}
			}
		}
	}
	if len(samples) < 20 {
		t.Fatalf("scrape: only %d series:\n%s", len(samples), b)
	}
	return samples, families, values
}

// TestOperationsGauges checks the values of the gauges added for the
// alert rules on a fresh single node.
func TestOperationsGauges(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	var values map[string]float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, values = scrapeValues(t, c.URL(0)+"/metrics")
		if values[`oidcd_signing_keys{state="active"}`] == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cases := []struct {
		series   string
		min, max float64
	}{
		{"oidcd_raft_has_leader", 1, 1},
		{"oidcd_raft_voters", 1, 1},
		{`oidcd_signing_keys{state="active"}`, 1, 1},
		{`oidcd_signing_keys{state="retired"}`, 0, 0},
		{"oidcd_signing_key_active_age_seconds", 0, 60},
		{"oidcd_signing_key_rotation_period_seconds", node.DefaultKeyRotation.Seconds(), node.DefaultKeyRotation.Seconds()},
		{"oidcd_data_dir_bytes", 1, 1 << 30},
		{"oidcd_state_file_bytes", 1, 1 << 30},
		{"oidcd_data_dir_free_bytes", 1, math.MaxFloat64},
	}
	for _, tc := range cases {
		v, ok := values[tc.series]
		if !ok || v < tc.min || v > tc.max {
			t.Errorf("%s: got %v (present %v), want between %v and %v", tc.series, v, ok, tc.min, tc.max)
		}
	}
	if values["oidcd_data_dir_bytes"] < values["oidcd_state_file_bytes"] {
		t.Errorf("data dir %v bytes is less than its state file %v", values["oidcd_data_dir_bytes"], values["oidcd_state_file_bytes"])
	}
	build := false
	for k, v := range values {
		build = build || (strings.HasPrefix(k, `oidcd_build_info{goversion="`+runtime.Version()+`",version="`) && v == 1)
	}
	if !build {
		t.Error("no oidcd_build_info{goversion=<this Go>,version=...} 1")
	}
}

// goSource is the text of the module's non-test Go files.
func goSource(t *testing.T) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sb.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}
