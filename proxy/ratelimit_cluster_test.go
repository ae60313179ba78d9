package proxy

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// clusterLimitsYAML: tenant t1 may make 5 mutating calls and 4 reads
// across all replicas sharing the Redis, then one per 1000 s: nothing
// refills during the test, whatever the clock of the Redis server.
const clusterLimitsYAML = `
admin: {address: "off"}
state:
  backend: redis
  redis: {addrs: ["${REDIS}"], key_prefix: "limits-test:"}
brokers:
  - name: b1
    url: ${B1_URL}
    validation: {without_catalog: forward}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    limits:
      mutations: {rate: 0.001, burst: 5}
      reads: {rate: 0.001, burst: 4}
      scope: cluster
    routes: [{broker: b1}]
`

// replica is one gateway of several sharing a redis-server, with its own
// store connection, metrics and log.
type replica struct {
	g   *Gateway
	srv *httptest.Server
	reg *prometheus.Registry
	log *osbtest.Buffer
}

func startReplica(t *testing.T, cfg *config.Config, clock *osbtest.Clock) *replica {
	t.Helper()
	rc := cfg.State.Redis
	st, err := backend.Open(store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: rc.Addrs,
		KeyPrefix: rc.KeyPrefix, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: 5 * time.Second}}, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &replica{reg: prometheus.NewRegistry(), log: &osbtest.Buffer{}}
	m, err := NewMetrics(r.reg, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	if r.g, err = New(cfg, Options{Store: st, Now: clock.Now, Metrics: m, Logger: slog.New(slog.NewJSONHandler(r.log, nil))}); err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(r.g)
	t.Cleanup(r.srv.Close)
	return r
}

// TestSharedLimitAcrossReplicas: two gateways, each with its own
// connection to one redis-server, admit together what one shared limit
// allows, and refuse the rest with the time until the next token. With
// the Redis gone, each falls back to its own bucket of the same size (it
// fails open to the local limit), counts the failure and logs it.
func TestSharedLimitAcrossReplicas(t *testing.T) {
	rs := storetest.StartRedis(t)
	b1 := osbtest.NewBroker(t, nil)
	cfg, err := config.Parse([]byte(clusterLimitsYAML), config.Options{LookupEnv: func(k string) (string, bool) {
		return map[string]string{"REDIS": rs.Addr, "B1_URL": b1.URL}[k], true
	}})
	if err != nil {
		t.Fatal(err)
	}
	clock := osbtest.NewClock(time.Now())
	replicas := []*replica{startReplica(t, cfg, clock), startReplica(t, cfg, clock)}

	admitted := map[int]int{}
	for i := range 20 {
		r := replicas[i%2]
		res, body := do(t, "DELETE", r.srv.URL+fmt.Sprintf("/t1/b1/v2/service_instances/i-%d?service_id=s&plan_id=p", i),
			"t1-user", "t1-pass", "2.16", nil)
		admitted[res.StatusCode]++
		if res.StatusCode != 429 {
			continue
		}
		// 1000 s per call, less the moments since the burst was taken.
		if secs, _ := strconv.Atoi(res.Header.Get("Retry-After")); secs < 990 || secs > 1000 {
			t.Errorf("Retry-After %q, want about 1000", res.Header.Get("Retry-After"))
		}
		if !strings.Contains(body, "may make 0.001 mutating calls per second (burst 5), shared by all gateway replicas") {
			t.Errorf("refusal: %s", body)
		}
	}
	if admitted[200] != 5 || admitted[429] != 15 {
		t.Errorf("two replicas admitted %v, want 5 of 20 (one shared burst)", admitted)
	}
	if n := len(b1.Requests()); n != 5 {
		t.Errorf("the broker saw %d calls, want 5", n)
	}

	rs.Stop()
	admitted = map[int]int{}
	for i := range 12 {
		res, body := do(t, "GET", replicas[i%2].srv.URL+"/t1/b1/v2/service_instances/i1/last_operation", "t1-user", "t1-pass", "2.16", nil)
		admitted[res.StatusCode]++
		if res.StatusCode != 200 && res.StatusCode != 429 {
			t.Errorf("poll with Redis down: %d %s", res.StatusCode, body)
		}
	}
	if admitted[200] != 8 || admitted[429] != 4 {
		t.Errorf("with Redis down, two replicas admitted %v, want 4 reads each (their own buckets)", admitted)
	}
	for i, r := range replicas {
		// One failure: Redis is then left alone for a second of the
		// (standing) clock.
		if got := counter(t, r.reg, "osb_gateway_store_errors_total", map[string]string{"op": "rate_limit"}); got != 1 {
			t.Errorf("replica %d: store_errors_total{op=rate_limit} = %v, want 1", i, got)
		}
		if got := strings.Count(r.log.String(), "shared rate limits unavailable"); got != 1 {
			t.Errorf("replica %d logged the failure %d times, want once:\n%s", i, got, r.log.String())
		}
	}
}

// TestClusterLimitNeedsRedis: a configuration that passed validation but
// a Gateway given another store (as a test does) is refused, not served
// with a limit that is not shared.
func TestClusterLimitNeedsRedis(t *testing.T) {
	cfg, err := config.Parse([]byte(clusterLimitsYAML), config.Options{LookupEnv: func(k string) (string, bool) {
		return map[string]string{"REDIS": "127.0.0.1:1", "B1_URL": "http://127.0.0.1:1"}[k], true
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(cfg, Options{Logger: slog.New(slog.DiscardHandler)}) // an in-memory store
	if err == nil || !strings.Contains(err.Error(), "limits.scope cluster needs the redis state store") {
		t.Errorf("New = %v", err)
	}
}
