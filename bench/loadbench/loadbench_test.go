// Quick checks that the benchmark works: every in-process target of every
// request kind answers 200 under a short load, the catalog cache's counts
// and byte checks hold, and the report prints. Nothing here asserts on
// performance.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/rules"
)

func TestInProcessTargetsAnswerAndReportPrints(t *testing.T) {
	// A smaller catalog-1mb catalog keeps the test quick under -race: the
	// gateway indexes it (decodes it and compiles its schemas) on the miss.
	e, err := newEnv(testLargeSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	infos, err := e.check(allKinds)
	if err != nil {
		t.Fatal(err)
	}
	const conns = 2
	m := meta{GOGC: 200, Duration: "150ms", Warmup: "20ms", Rounds: 1, Targets: e.targetNames(allKinds), Catalogs: infos}
	samples := map[cell]*sample{}
	for _, kind := range allKinds {
		path, err := e.requestPath(kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range e.targetsFor(kind) {
			s, err := load(context.Background(), spec{url: tg.url(path), header: tg.header, conns: conns,
				warmup: 20 * time.Millisecond, measure: 150 * time.Millisecond, upstream: tg.catalogRequests})
			if err != nil {
				t.Fatalf("%s %s: %v", tg.name, kind, err)
			}
			if len(s.errors) > 0 || s.requests == 0 || s.cpu <= 0 {
				t.Errorf("%s %s: %d requests, cpu %s, errors %v; want only 200s, some requests and CPU time",
					tg.name, kind, s.requests, s.cpu, s.errors)
			}
			samples[cell{kind, conns, tg.name}] = s
		}
	}
	if got, want := strings.Join(m.Targets, ","), "direct,bare proxy,gateway,direct 5 ms,gateway cached"; got != want {
		t.Fatalf("targets %q, want %q", got, want)
	}

	rep := buildReport(m, allKinds, []int{conns}, samples)
	_, back := checkReport(t, rep,
		"| request | conns | target | req/s |",
		"| catalog | 2 | gateway |",
		"| last_operation | 2 | bare proxy |",
		"| catalog-cache | 2 | direct 5 ms |",
		"| catalog-cache | 2 | gateway cached |",
		"| catalog-1mb | 2 | gateway cached |",
		"Verdict (catalog): at 2 connections",
		"Verdict (last_operation): at 2 connections",
		"| gateway − bare proxy CPU/req |",
		"| request | conns | gateway cached req/s | × direct | × direct 5 ms |",
		"| catalog-cache | 2 |",
		"| catalog-1mb | 2 |",
		"Verdict (catalog-cache): at 2 connections a cached catalog through the gateway keeps",
		"Verdict (catalog-cache): at 2 connections a cached catalog through the gateway reaches",
		"Verdict (catalog-1mb): at 2 connections the ",
		"catalog is served from the cache without being re-encoded",
		"Verdict (catalog-1mb): a cache hit makes no upstream request: PASS",
		"Verdict (catalog-cache): the catalog arrives through the gateway byte-identical to the broker's: PASS",
	)
	if len(back.Rows) != 11 || len(back.Verdicts) != 2 || len(back.Chain) != 2 || len(back.Cache) != 2 || len(back.CacheVerdicts) != 7 {
		t.Errorf("JSON report has %d rows, %d verdicts, %d chain rows, %d cache rows, %d cache verdicts; want 11, 2, 2, 2, 7",
			len(back.Rows), len(back.Verdicts), len(back.Chain), len(back.Cache), len(back.CacheVerdicts))
	}
	for _, r := range back.Rows {
		if r.RPS <= 0 {
			t.Errorf("%s %s: rate %v, want > 0", r.Request, r.Target, r.RPS)
		}
	}
	checkCacheSection(t, back)
}

// checkCacheSection checks the facts of the cache section that do not
// depend on speed: the bytes arrive unchanged, the brokers' counts move for
// direct requests, and cache hits reach no broker.
func checkCacheSection(t *testing.T, rep report) {
	t.Helper()
	for _, c := range rep.Meta.Catalogs {
		if !c.Identical || c.Bytes == 0 {
			t.Errorf("%s: catalog of %d bytes, identical %v (%v); want identical bytes", c.Request, c.Bytes, c.Identical, c.Different)
		}
	}
	for _, r := range rep.Rows {
		switch {
		case r.Request != kindCatalogCache && r.Request != kindCatalogLarge:
		case r.BrokerCatalogRequests == nil:
			t.Errorf("%s %s: broker catalog requests not counted", r.Request, r.Target)
		case r.Target == targetCached && *r.BrokerCatalogRequests != 0:
			t.Errorf("%s %s: %d catalog requests reached the broker; want 0 (cache hits)", r.Request, r.Target, *r.BrokerCatalogRequests)
		case r.Target != targetCached && *r.BrokerCatalogRequests == 0:
			t.Errorf("%s %s: no catalog request reached the broker; want one per request", r.Request, r.Target)
		}
	}
}

func TestExtraTargetsAnswerAndReportPrints(t *testing.T) {
	e, err := newEnv(testLargeSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	kinds := []string{kindTLS, kindTracing}
	if err := e.startExtra(kinds); err != nil {
		t.Fatal(err)
	}
	if _, err := e.check(kinds); err != nil {
		t.Fatal(err)
	}
	const conns = 2
	m := meta{GOGC: 200, Duration: "150ms", Warmup: "20ms", Rounds: 1, Targets: e.targetNames(kinds)}
	if got, want := strings.Join(m.Targets, ","), "gateway http,gateway https,all off,all on 1%,all on 100%"; got != want {
		t.Fatalf("targets %q, want %q", got, want)
	}
	samples := map[cell]*sample{}
	for _, kind := range kinds {
		path, err := e.requestPath(kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range e.targetsFor(kind) {
			s, err := load(context.Background(), spec{url: tg.url(path), header: tg.header, conns: conns,
				warmup: 20 * time.Millisecond, measure: 150 * time.Millisecond, upstream: tg.counter, tls: tg.tls})
			if err != nil {
				t.Fatalf("%s %s: %v", tg.name, kind, err)
			}
			if len(s.errors) > 0 || s.requests == 0 || s.cpu <= 0 {
				t.Errorf("%s %s: %d requests, cpu %s, errors %v; want only 200s, some requests and CPU time",
					tg.name, kind, s.requests, s.cpu, s.errors)
			}
			samples[cell{kind, conns, tg.name}] = s
		}
	}

	rep := buildReport(m, kinds, []int{conns}, samples)
	md, back := checkReport(t, rep,
		"| conns | target | req/s | p50 | p99 | CPU/req | CPU/req over http |",
		"| 2 | gateway https |",
		"| conns | target | req/s | p50 | p99 | CPU/req | CPU/req over all off |",
		"| 2 | all on 100% |",
		"Verdict (tls): at 2 connections gateway https keeps ",
		"Verdict (tracing): at 2 connections all on 1% keeps ≥ 90% of all off's throughput",
		"Verdict (tracing): at 2 connections all on 100% keeps ≥ 75% of all off's throughput",
	)
	if strings.Contains(md, "| request | conns | target |") {
		t.Errorf("report prints the pass-through table without pass-through rows:\n%s", md)
	}
	if len(back.Rows) != 0 || len(back.TLS) != 2 || len(back.Tracing) != 3 || len(back.ExtraVerdicts) != 3 {
		t.Fatalf("JSON report has %d rows, %d tls rows, %d tracing rows, %d verdicts; want 0, 2, 3, 3",
			len(back.Rows), len(back.TLS), len(back.Tracing), len(back.ExtraVerdicts))
	}
	for _, r := range back.TLS {
		// Every connection was opened, and its handshake made, in the
		// warm-up: keep-alive holds.
		if r.Connections == nil || *r.Connections != 0 {
			t.Errorf("tls %s: connections opened %v, want 0 in the measured period", r.Target, fmtOptCount(r.Connections))
		}
	}
	for _, r := range back.Tracing {
		switch {
		case r.Target == targetAllOff && r.SpansPerReq != nil:
			t.Errorf("all off: %v spans per request, want none counted", *r.SpansPerReq)
		case r.Target == targetOn100 && (r.SpansPerReq == nil || *r.SpansPerReq < 1.5):
			t.Errorf("all on 100%%: spans per request %v, want about 2 (server and client span)", r.SpansPerReq)
		}
	}
	// The audit logs are written every second (fsync interval).
	time.Sleep(1200 * time.Millisecond)
	for _, name := range []string{"audit-1.log", "audit-100.log"} {
		fi, err := os.Stat(filepath.Join(e.auditDir, name))
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v, size %d; want audit records", name, err, sizeOf(fi))
		}
	}
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return 0
	}
	return fi.Size()
}

// testLargeSize is the size of catalog-1mb's catalog in tests.
const testLargeSize = 64 << 10

func TestLargeCatalogIsValidAndAtLeastItsSize(t *testing.T) {
	for _, size := range []int{testLargeSize, largeCatalogSize} {
		body := largeCatalog(size)
		if len(body) < size || len(body) > size+size/10 {
			t.Errorf("%d bytes, want from %d to 10%% more", len(body), size)
		}
	}
	body := largeCatalog(testLargeSize)
	if !bytes.Equal(body, largeCatalog(testLargeSize)) {
		t.Error("two calls return different bytes; want a fixed catalog")
	}
	// Every service has the same shape, so a smaller catalog is checked as
	// well as the large one, in less time.
	_, findings, err := rules.NewIndex(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Errorf("finding: %s", f)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		name string
		q    float64
		want time.Duration
	}{
		{"p50", 0.50, 500 * time.Microsecond},
		{"p99", 0.99, 990 * time.Microsecond},
		{"max", 1, 1000 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.quantile(tc.q)
			if diff := float64(got-tc.want) / float64(tc.want); diff < -0.005 || diff > 0.005 {
				t.Errorf("quantile(%v) = %s, want %s within 0.5%%", tc.q, got, tc.want)
			}
		})
	}
	var empty histogram
	if got := empty.quantile(0.5); got != 0 {
		t.Errorf("empty histogram: quantile %s, want 0", got)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "defaults"},
		{name: "all flags", args: []string{"-duration", "1s", "-warmup", "0s", "-conns", "2, 8", "-requests", "catalog",
			"-nginx", "off", "-rounds", "2", "-json"}},
		{name: "bad conns", args: []string{"-conns", "1,0,x"}, wantErr: `-conns: "0"`},
		{name: "cache kinds", args: []string{"-requests", "catalog-cache, catalog-1mb"}},
		{name: "extra kinds", args: []string{"-requests", "tls,tracing,provision,auth-flood,protect"}},
		{name: "bad request kind", args: []string{"-requests", "bind"}, wantErr: `-requests: "bind"`},
		{name: "bad nginx mode", args: []string{"-nginx", "on"}, wantErr: `-nginx: "on"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestProvisionTargetsAnswer201AndReportPrints(t *testing.T) {
	e, err := newEnv(testLargeSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	kinds := []string{kindProvision}
	if err := e.startExtra(kinds); err != nil {
		t.Fatal(err)
	}
	if _, err := e.check(kinds); err != nil {
		t.Fatal(err)
	}
	// The held flood opens with a minute's worth of requests (2,400), more
	// than a 150 ms run on a loaded machine under -race leaves room for: the
	// test keeps its shape (opening burst, held, spread) at a sixtieth of that (40).
	for _, tg := range e.authFlood {
		if tg.flood != nil && tg.flood.opening > 0 {
			tg.flood.opening, tg.flood.inFlight = tg.flood.opening/60, tg.flood.inFlight/60
		}
	}
	m := meta{GOGC: 200, Duration: "150ms", Warmup: "20ms", Rounds: 1, Targets: e.targetNames(kinds)}
	if got, want := strings.Join(m.Targets, ","), "direct,gateway memory,gateway bolt"; got != want {
		t.Fatalf("targets %q, want %q", got, want)
	}
	const conns = 2
	samples := map[cell]*sample{}
	for _, tg := range e.targetsFor(kindProvision) {
		s, err := load(context.Background(), loadSpec(kindProvision, tg, "", spec{conns: conns,
			warmup: 20 * time.Millisecond, measure: 150 * time.Millisecond}))
		if err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
		if len(s.errors) > 0 || s.requests == 0 {
			t.Errorf("%s: %d provisions, errors %v; want only 201s (new instances never blocked)", tg.name, s.requests, s.errors)
		}
		samples[cell{kindProvision, conns, tg.name}] = s
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, "state.db")); err != nil {
		t.Errorf("bolt state file: %v", err)
	}

	rep := buildReport(m, kinds, []int{conns}, samples)
	_, back := checkReport(t, rep,
		"| conns | target | req/s | p50 | p99 | CPU/req | × direct | × gateway memory |",
		"| 2 | direct |",
		"| 2 | gateway memory |",
		"| 2 | gateway bolt |",
		"Verdict (provision): at 2 connections the gateway with the bolt store completes ",
	)
	if len(back.Rows) != 0 || len(back.Provision) != 3 || len(back.ProvisionVerdicts) != 1 || back.Provision[2].RatioMemory == nil {
		t.Fatalf("JSON report has %d rows, %d provision rows, %d verdicts; want 0, 3, 1 and a bolt/memory ratio",
			len(back.Rows), len(back.Provision), len(back.ProvisionVerdicts))
	}
	dir := e.stateDir
	e.close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state directory %s left behind: %v", dir, err)
	}
}

// TestPairedRatioIsTheMedianOfRoundRatios: with three or more rounds a
// burst of foreign load in one round (here the gateway's second) does not
// move the ratio; with fewer it is the pooled one.
func TestPairedRatioIsTheMedianOfRoundRatios(t *testing.T) {
	for _, tt := range []struct {
		name string
		a, b row
		want float64
	}{
		{"median of three", row{RPS: 70, RoundRPS: []float64{90, 30, 90}}, row{RPS: 100, RoundRPS: []float64{100, 100, 100}}, 0.9},
		{"median of four", row{RoundRPS: []float64{80, 90, 10, 100}}, row{RoundRPS: []float64{100, 100, 100, 100}}, 0.85},
		{"pooled below three rounds", row{RPS: 60, RoundRPS: []float64{90, 30}}, row{RPS: 100, RoundRPS: []float64{100, 100}}, 0.6},
		{"pooled when rounds differ", row{RPS: 50, RoundRPS: []float64{50, 50, 50}}, row{RPS: 100, RoundRPS: []float64{100, 100}}, 0.5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := pairedRatio(&tt.a, &tt.b); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("pairedRatio = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAuthFloodTargetsAnswerAndReportPrints(t *testing.T) {
	e, err := newEnv(testLargeSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	kinds := []string{kindAuthFlood}
	if err := e.startExtra(kinds); err != nil {
		t.Fatal(err)
	}
	if _, err := e.check(kinds); err != nil {
		t.Fatal(err)
	}
	// The held flood opens with a minute's worth of requests (2,400), more
	// than a 150 ms run on a loaded machine under -race leaves room for: the
	// test keeps its shape (opening burst, held, spread) at a sixtieth of that (40).
	for _, tg := range e.authFlood {
		if tg.flood != nil && tg.flood.opening > 0 {
			tg.flood.opening, tg.flood.inFlight = tg.flood.opening/60, tg.flood.inFlight/60
		}
	}
	m := meta{GOGC: 200, Duration: "150ms", Warmup: "20ms", Rounds: 1, Targets: e.targetNames(kinds)}
	if got, want := strings.Join(m.Targets, ","), "bcrypt tenant,+ 40 wrong/s, 1 address,+ 40 wrong/s, 40 addresses,+ 40 wrong/s, 199 addresses, held"; got != want {
		t.Fatalf("targets %q, want %q", got, want)
	}
	path, err := e.requestPath(kindAuthFlood)
	if err != nil {
		t.Fatal(err)
	}
	const conns = 2
	samples := map[cell]*sample{}
	for _, tg := range e.targetsFor(kindAuthFlood) {
		sp := spec{conns: conns, warmup: 20 * time.Millisecond, measure: 150 * time.Millisecond}
		if tg.flood != nil {
			sp.side = tg.flood.start
		}
		s, err := load(context.Background(), loadSpec(kindAuthFlood, tg, path, sp))
		if err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
		if len(s.errors) > 0 || s.requests == 0 {
			t.Errorf("%s: %d requests, errors %v; want only 200s", tg.name, s.requests, s.errors)
		}
		if (s.flood != nil) != (tg.flood != nil) {
			t.Fatalf("%s: flood stats %v, want them exactly when the target floods", tg.name, s.flood)
		}
		if s.flood != nil {
			// Every wrong password is answered 401 (bcrypt ran), 429 (over the
			// limit) or not at all before the run ended; never 200.
			for answer := range s.flood.Answers {
				if answer != "status 401" && answer != "status 429" && answer != floodSkipped {
					t.Errorf("%s: the flood got %q", tg.name, answer)
				}
			}
			// Without a mark, the figures cover the whole flood, whose first
			// wrong passwords (one, or its opening) go out as it starts.
			_, stop := tg.flood.start(context.Background())
			if st := stop(); st.Sent != int64(max(1, tg.flood.opening)) || st.Addresses != len(tg.flood.clients) {
				t.Errorf("%s: a flood stopped at once sent %d from %d addresses; want %d from %d",
					tg.name, st.Sent, st.Addresses, max(1, tg.flood.opening), len(tg.flood.clients))
			}
		}
		var mr sample
		mr.add(s)
		samples[cell{kindAuthFlood, conns, tg.name}] = &mr
	}

	rep := buildReport(m, kinds, []int{conns}, samples)
	_, back := checkReport(t, rep,
		"| conns | target | req/s | p50 | p99 | p99 × undisturbed |",
		"| 2 | bcrypt tenant |",
		"| 2 | + 40 wrong/s, 1 address |",
		"| 2 | + 40 wrong/s, 40 addresses |",
		"| 2 | + 40 wrong/s, 199 addresses, held |",
		"Verdict (auth-flood): at 2 connections, with 40 wrong passwords/s from one address the legitimate p99 stays ≤ 2×",
		"Verdict (auth-flood): at 2 connections, with 40 wrong passwords/s from 199 addresses holding their connections",
	)
	if len(back.Rows) != 0 || len(back.AuthFlood) != 4 || len(back.AuthFloodVerdicts) != 2 || back.AuthFlood[1].Flood == nil {
		t.Fatalf("JSON report has %d rows, %d auth-flood rows, %d verdicts; want 0, 4, 2 and the flood's answers",
			len(back.Rows), len(back.AuthFlood), len(back.AuthFloodVerdicts))
	}
}

// checkReport writes rep as Markdown, requires each of wants in it, writes
// it as JSON and returns the Markdown and the JSON decoded back.
func checkReport(t *testing.T, rep *report, wants ...string) (string, report) {
	t.Helper()
	var md bytes.Buffer
	rep.writeMarkdown(&md)
	for _, want := range wants {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
	var js bytes.Buffer
	if err := rep.writeJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON report does not decode: %v", err)
	}
	return md.String(), back
}
