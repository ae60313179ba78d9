package console

import (
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy"
)

// The overview did not say what needs an operator: each matter is one
// line, linking to where it is handled, and nothing shows when nothing
// needs one.
func TestAttentionListsWhatNeedsAnOperator(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := &Console{o: Options{OldOperation: DefaultOldOperation}}
	if got := c.attention(&overviewData{Brokers: []brokerRow{{BrokerInfo: proxy.BrokerInfo{Name: "b"}}}}, nil, nil, nil, now); len(got) != 0 {
		t.Fatalf("with nothing wrong: %+v", got)
	}
	d := &overviewData{
		Brokers: []brokerRow{
			{BrokerInfo: proxy.BrokerInfo{Name: "open", Breaker: "open"}},
			{BrokerInfo: proxy.BrokerInfo{Name: "down", CatalogError: "connection refused"}},
			{BrokerInfo: proxy.BrokerInfo{Name: "fine", Breaker: "closed"}},
		},
		OrphansReported: 2,
		Certs:           []certRow{{Use: "listener", Subject: "CN=gw", In: "3d00h", Soon: true}, {Use: "upstream", Subject: "CN=later"}},
		ReloadFailures:  1,
		NextCredential:  []string{"rotated"},
	}
	ops := []proxy.Operation{
		{Kind: "provision", Broker: "b", InstanceID: "i-old", PlanID: "p1", Started: now.Add(-2 * time.Hour)},
		{Kind: "bind", Broker: "b", InstanceID: "i-new", Started: now.Add(-time.Minute)},
	}
	drift := []proxy.DriftReport{
		{Broker: "b", Items: []proxy.DriftItem{{Kind: "plan_removed", Service: "svc", Plan: "small", LiveInstances: 4}}},
		{Broker: "quiet", Items: []proxy.DriftItem{{Kind: "plan_removed", Service: "svc", Plan: "unused"}}},
	}
	got := c.attention(d, ops, drift, map[string]string{"p1": "svc/large"}, now)
	want := []struct{ what, href string }{
		{"Broker open: its circuit breaker is open", "#brokers"},
		{"Broker down is down: connection refused", "#brokers"},
		{"Broker b: its latest catalog strands 4 live instances (plan_removed svc/small)", "/ui/drift"},
		{"1 operation in progress for more than 30m00s; the oldest, provision of instance i-old (svc/large) on broker b, for 2h00m", "/ui/operations?older=30m"},
		{"2 orphan candidates reported and not mitigated", "/ui/operations#orphans"},
		{"The listener certificate CN=gw expires in 3d00h", "#certs"},
		{"1 reload of gateway.yaml refused", ""},
		{"Broker rotated accepts only its next credential", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("%d matters, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].What, w.what) || got[i].Href != w.href || got[i].Do == "" {
			t.Errorf("matter %d: %+v, want %q linking to %q", i, got[i], w.what, w.href)
		}
	}
}
