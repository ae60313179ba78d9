package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// The audit page: the records of the audit file, searched with the
// filters of `osb-gateway audit query`, newest first, a page at a time,
// and whether the chain verifies (`osb-gateway audit verify`) and where
// it breaks if it does not.

// auditPageSize is how many records the audit page shows at once.
const auditPageSize = 50

type auditData struct {
	Tenant, Broker, Instance, Status, Since, Until string
	BrokerNames, TenantNames, Classes              []string
	Records                                        []audit.Record
	Matched, From, To                              int
	Prev, Next                                     string // links to the pages before and after; "" for none
	Verdict                                        *proxy.AuditVerdict
	NoFile                                         bool
	Names                                          map[string]string
}

func (c *Console) audit(r *http.Request, f *frame) (any, error) {
	v := c.o.View
	q := r.URL.Query()
	d := &auditData{Tenant: q.Get("tenant"), Broker: q.Get("broker"), Instance: strings.TrimSpace(q.Get("instance")),
		Status: strings.TrimSpace(q.Get("status")), Since: strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until")),
		Classes: []string{"2xx", "4xx", "5xx"}, Names: c.catalogNames(r.Context())}
	routes := v.Routes()
	d.BrokerNames = routeBrokers(routes)
	d.TenantNames = names(routes, func(x proxy.RouteInfo) string { return x.Tenant })
	verdict, err := v.VerifyAudit(r.Context())
	if errors.Is(err, proxy.ErrNoAuditFile) {
		d.NoFile = true
		return d, nil
	}
	d.Verdict = &verdict
	fl := audit.Filter{Tenant: d.Tenant, Broker: d.Broker, InstanceID: d.Instance, Status: d.Status}
	if err := audit.ParseStatus(d.Status); err != nil {
		return d, err
	}
	for _, t := range []struct {
		name, s string
		to      *time.Time
	}{{"since", d.Since, &fl.Since}, {"until", d.Until, &fl.Until}} {
		if t.s == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, t.s)
		if err != nil {
			return d, fmt.Errorf("%s must be a time in RFC 3339 (like 2026-11-01T00:00:00Z), got %q", t.name, t.s)
		}
		*t.to = at
	}
	skip, _ := strconv.Atoi(q.Get("skip"))
	skip = max(skip, 0)
	page, err := v.AuditRecords(r.Context(), proxy.AuditQuery{Filter: fl, Skip: skip, Limit: auditPageSize})
	if err != nil {
		return d, errors.New(auditError(err))
	}
	d.Records, d.Matched = page.Records, page.Matched
	d.From, d.To = skip+1, skip+len(page.Records)
	link := func(skip int) string {
		q := url.Values{}
		for k, v := range map[string]string{"tenant": d.Tenant, "broker": d.Broker, "instance": d.Instance, "status": d.Status, "since": d.Since, "until": d.Until} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if skip > 0 {
			q.Set("skip", strconv.Itoa(skip))
		}
		return "/ui/audit?" + q.Encode()
	}
	if skip > 0 {
		d.Prev = link(max(skip-auditPageSize, 0))
	}
	if d.To < d.Matched && d.To+auditPageSize <= proxy.MaxAuditPage {
		d.Next = link(d.To)
	}
	return d, nil
}

// auditError words an audit read's failure for a page.
func auditError(err error) string {
	if errors.Is(err, proxy.ErrNoAuditFile) {
		return "No audit records to show: " + err.Error() + "."
	}
	return "Reading the audit records failed: " + err.Error()
}
