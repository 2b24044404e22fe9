package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestHostSplit(t *testing.T) {
	down := newHostSet("http://127.0.0.1:8080", "http://127.0.0.1:8081/", "http://LocalHost:9000")
	up, _ := url.Parse("http://127.0.0.1:7000")
	upHost := hostKey(up)
	cases := []struct {
		url      string
		up, down bool
	}{
		{"http://127.0.0.1:7000/authorize?client_id=x", true, false},
		{"http://127.0.0.1:7000/authorize/signin", true, false},
		{"http://127.0.0.1:8080/federation/up/callback?code=c", false, true},
		{"http://127.0.0.1:8081/authorize", false, true},
		{"http://localhost:9000/authorize", false, true}, // a host's case is not its own
		{"http://localhost.:9000/authorize", false, true},
		{"http://127.0.0.1:8082/authorize", false, false}, // another port is another site
		{"http://127.0.0.1/authorize", false, false},      // port 80
		{"https://127.0.0.1:7000/authorize", true, false}, // the same host and port
		{"http://127.0.0.2:7000/authorize", false, false},
		{"http://[::1]:8080/authorize", false, false},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			u, err := url.Parse(c.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := hostKey(u) == upHost; got != c.up {
				t.Errorf("upstream: got %v, want %v (key %q)", got, c.up, hostKey(u))
			}
			if got := down.has(u); got != c.down {
				t.Errorf("downstream: got %v, want %v (key %q)", got, c.down, hostKey(u))
			}
		})
	}
}

func TestHostKeyDefaultPorts(t *testing.T) {
	for raw, want := range map[string]string{
		"http://127.0.0.1":       "127.0.0.1:80",
		"https://127.0.0.1":      "127.0.0.1:443",
		"http://127.0.0.1:80/x":  "127.0.0.1:80",
		"http://[::1]:8080/":     "[::1]:8080",
		"http://LOCALHOST:1/cb":  "localhost:1",
		"https://localhost./cb":  "localhost:443",
		"http://127.0.0.1:0/cb?": "127.0.0.1:0",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := hostKey(u); got != want {
			t.Errorf("hostKey(%s): got %q, want %q", raw, got, want)
		}
	}
}

// TestSiteJar: the two oidcds' cookies, of the same names on one host
// name, stay apart, and the downstream's nodes share theirs.
func TestSiteJar(t *testing.T) {
	up, _ := url.Parse("http://127.0.0.1:7000/authorize")
	down0, _ := url.Parse("http://127.0.0.1:8080/authorize")
	down1, _ := url.Parse("http://127.0.0.1:8081/federation/up/callback")
	j := newSiteJar(hostKey(up))
	j.SetCookies(up, []*http.Cookie{{Name: "oidcd_session", Value: "upstream", Path: "/"}})
	j.SetCookies(down0, []*http.Cookie{{Name: "oidcd_session", Value: "downstream", Path: "/"}})
	cases := []struct {
		u    *url.URL
		want string
	}{{up, "upstream"}, {down0, "downstream"}, {down1, "downstream"}}
	for _, c := range cases {
		cs := j.Cookies(c.u)
		if len(cs) != 1 || cs[0].Value != c.want {
			t.Errorf("cookies for %s: got %v, want one oidcd_session=%s", c.u, cs, c.want)
		}
	}
}

func TestFedTimes(t *testing.T) {
	var ft fedTimes
	for _, r := range []struct {
		up bool
		d  time.Duration
	}{{false, 3 * time.Millisecond}, {true, 5 * time.Millisecond}, {true, 60 * time.Millisecond}, {false, 20 * time.Millisecond}, {false, time.Millisecond}} {
		ft.add(r.up, r.d)
	}
	if ft.up != 65*time.Millisecond || ft.upN != 2 || ft.down != 24*time.Millisecond || ft.downN != 3 {
		t.Errorf("got %+v, want 65 ms in 2 requests up, 24 ms in 3 down", ft)
	}
}

const metricsPage = `# HELP oidcd_federation_upstream_seconds Time the upstream took.
# TYPE oidcd_federation_upstream_seconds histogram
oidcd_federation_upstream_seconds_bucket{provider="up",le="0.01"} 3
oidcd_federation_upstream_seconds_bucket{provider="up",le="+Inf"} 40
oidcd_federation_upstream_seconds_sum{provider="up"} 1.25
oidcd_federation_upstream_seconds_count{provider="up"} 40
oidcd_federation_upstream_seconds_sum{provider="hq"} 9
oidcd_federation_upstream_seconds_count{provider="hq"} 3
oidcd_federation_signins_total{provider="up",result="ok"} 40
`

func TestParseHistogram(t *testing.T) {
	cases := []struct {
		name, body   string
		label, value string
		want         histSample
		err          bool
	}{
		{name: "one provider", body: metricsPage, label: "provider", value: "up", want: histSample{Sum: 1.25, Count: 40}},
		{name: "the other", body: metricsPage, label: "provider", value: "hq", want: histSample{Sum: 9, Count: 3}},
		{name: "every series", body: metricsPage, want: histSample{Sum: 10.25, Count: 43}},
		{name: "not observed yet", body: "# HELP x y\nprocess_cpu_seconds_total 3.5\n", label: "provider", value: "up"},
		{name: "empty", body: "", label: "provider", value: "up"},
		{name: "labels in any order, a timestamp, exponent",
			body:  "oidcd_federation_upstream_seconds_sum{le=\"x\" , provider=\"up\",} 2.5e-1 1700000000000\noidcd_federation_upstream_seconds_count{provider=\"up\"} 7\n",
			label: "provider", value: "up", want: histSample{Sum: 0.25, Count: 7}},
		{name: "escaped label values",
			body:  `oidcd_federation_upstream_seconds_sum{note="a \"quoted\", {braced} one\\",provider="up"} 1` + "\n" + `oidcd_federation_upstream_seconds_count{provider="up\"x"} 9` + "\n",
			label: "provider", value: "up", want: histSample{Sum: 1}},
		{name: "a longer name is another metric",
			body:  "oidcd_federation_upstream_seconds_sum_total{provider=\"up\"} 5\noidcd_federation_upstream_seconds_count{provider=\"up\"} 1\n",
			label: "provider", value: "up", want: histSample{Count: 1}},
		{name: "no labels", body: "oidcd_federation_upstream_seconds_sum 2\noidcd_federation_upstream_seconds_count 4\n", want: histSample{Sum: 2, Count: 4}},
		{name: "a bad value", body: "oidcd_federation_upstream_seconds_sum{provider=\"up\"} many\n", label: "provider", value: "up", err: true},
		{name: "a negative sum", body: "oidcd_federation_upstream_seconds_sum{provider=\"up\"} -1\n", label: "provider", value: "up", err: true},
		{name: "NaN", body: "oidcd_federation_upstream_seconds_sum{provider=\"up\"} NaN\n", label: "provider", value: "up", err: true},
		{name: "no value", body: "oidcd_federation_upstream_seconds_sum{provider=\"up\"}\n", label: "provider", value: "up", err: true},
		{name: "an unterminated label", body: "oidcd_federation_upstream_seconds_sum{provider=\"up} 1\n", label: "provider", value: "up", err: true},
		{name: "a label without a value", body: "oidcd_federation_upstream_seconds_sum{provider} 1\n", label: "provider", value: "up", err: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseHistogram([]byte(c.body), fedMetric, c.label, c.value)
			switch {
			case c.err && err == nil:
				t.Fatalf("got %+v and no error, want an error", got)
			case !c.err && err != nil:
				t.Fatalf("got error %v, want %+v", err, c.want)
			case got != c.want:
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestHistSampleMinus(t *testing.T) {
	cases := []struct {
		name          string
		before, after histSample
		want          histSample
		err           bool
	}{
		{"the run's exchanges", histSample{Sum: 0.5, Count: 16}, histSample{Sum: 2.5, Count: 116}, histSample{Sum: 2, Count: 100}, false},
		{"none", histSample{Sum: 0.5, Count: 16}, histSample{Sum: 0.5, Count: 16}, histSample{}, false},
		{"a node restarted", histSample{Sum: 0.5, Count: 16}, histSample{Sum: 0.1, Count: 3}, histSample{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.after.minus(c.before)
			if (err != nil) != c.err {
				t.Fatalf("error %v, want one: %v", err, c.err)
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestSplitFigures(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name                              string
		total                             float64
		ops                               uint64
		up, down, ex                      time.Duration
		upN, downN                        uint64
		wait                              histSample
		known                             bool
		wantUp, wantWait, wantOwn, wantUB float64
		wantExchanges                     uint64
	}{
		{name: "ten sign-ins", total: 100, ops: 10, up: 600 * ms, down: 300 * ms, ex: 50 * ms, upN: 20, downN: 30,
			wait: histSample{Sum: 0.12, Count: 12}, known: true, wantUB: 60, wantWait: 10, wantUp: 70, wantOwn: 30, wantExchanges: 12},
		{name: "no metrics: the browser's alone", total: 100, ops: 10, up: 600 * ms, down: 300 * ms, ex: 50 * ms, upN: 20, downN: 30,
			wait: histSample{Sum: 5, Count: 12}, known: false, wantUB: 60, wantUp: 60, wantOwn: 40},
		{name: "no exchange counted", total: 100, ops: 10, up: 600 * ms, known: true, wantUB: 60, wantUp: 60, wantOwn: 40},
		{name: "no operation", total: 0, ops: 0, up: 600 * ms, wait: histSample{Sum: 1, Count: 1}, known: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := splitFigures(c.total, c.ops, c.up, c.down, c.ex, c.upN, c.downN, c.wait, c.known)
			if f.UpstreamBrowserMs != c.wantUB || f.UpstreamWaitMs != c.wantWait || f.UpstreamMs != c.wantUp || f.OwnMs != c.wantOwn || f.Exchanges != c.wantExchanges {
				t.Errorf("got browser %v + wait %v = upstream %v, own %v, %d exchanges; want %v + %v = %v, own %v, %d",
					f.UpstreamBrowserMs, f.UpstreamWaitMs, f.UpstreamMs, f.OwnMs, f.Exchanges, c.wantUB, c.wantWait, c.wantUp, c.wantOwn, c.wantExchanges)
			}
			if f.WaitKnown != c.known || f.Ops != c.ops || f.TotalMs != c.total {
				t.Errorf("got known %v, ops %d, total %v", f.WaitKnown, f.Ops, f.TotalMs)
			}
		})
	}
	f := splitFigures(100, 10, 600*ms, 300*ms, 50*ms, 20, 30, histSample{}, false)
	if f.DownstreamBrowserMs != 30 || f.ExchangeMs != 5 || f.UpstreamRequests != 2 || f.DownstreamRequests != 3 {
		t.Errorf("the browser's side: got %+v", f)
	}
}

func TestBesidePassword(t *testing.T) {
	runs := []matrixRun{
		{Scenario: "password-signin", Nodes: 1, OpsPerS: 40, Latency: latency{Mean: 200}},
		{Scenario: federatedName, Nodes: 1, OpsPerS: 30, Federation: &fedFigures{Ops: 300, OwnMs: 50}},
		{Scenario: "password-signin", Nodes: 3, OpsPerS: 20, Latency: latency{Mean: 400}},
		{Scenario: federatedName, Nodes: 3, OpsPerS: 10},
		{Scenario: federatedName, Nodes: 5, OpsPerS: 10, Federation: &fedFigures{Ops: 1, OwnMs: 1}},
	}
	besidePassword(runs)
	want := []*besideRun{nil, {OpsPerS: 40, MeanMs: 200, RateRatio: 0.75, OwnRatio: 0.25}, nil, {OpsPerS: 20, MeanMs: 400, RateRatio: 0.5}, nil}
	for i, r := range runs {
		switch {
		case want[i] == nil && r.Beside != nil:
			t.Errorf("run %d (%s on %d): got %+v, want none", i, r.Scenario, r.Nodes, *r.Beside)
		case want[i] != nil && (r.Beside == nil || *r.Beside != *want[i]):
			t.Errorf("run %d (%s on %d): got %+v, want %+v", i, r.Scenario, r.Nodes, r.Beside, *want[i])
		}
	}
	// Its verdict is none: judge leaves it without a ceiling or target.
	r := runs[1]
	judge(&r, ceilings{Argon2PerS: 38, TwoSig: 500, Trivial: 10000})
	if r.Met != nil || r.Ceiling != "" || r.Target != "" {
		t.Errorf("judge gave the federated run ceiling %q, target %q, met %v; want none", r.Ceiling, r.Target, r.Met)
	}
	res := &matrixResult{Runs: runs}
	md := res.federationTable()
	for _, s := range []string{"| 1 | 30 |", "password-signin: ops/s, mean", "| 40/s, 200.00 | 0.25 |", "all found", "| 3 | 10 |"} {
		if s == "| 3 | 10 |" {
			if strings.Contains(md, s) {
				t.Errorf("the split table has a row for a run without figures:\n%s", md)
			}
			continue
		}
		if !strings.Contains(md, s) {
			t.Errorf("the split table lacks %q:\n%s", s, md)
		}
	}
}
