package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy"
)

const usageCmdHelp = `usage [-config FILE] [-from TIME] [-to TIME] [-format csv|json] [-tenant T] [-broker B]

Writes the usage report of the period [from, to): per tenant, broker, service
and plan, the instance-hours, the distinct instances, the bindings created and
the instances live at the end, from the inventory in the state store that
gateway.yaml names and its usage records (kept inventory.usage_retention).
Times are RFC 3339 (2024-05-01T00:00:00Z); -to defaults to now, -from to 30
days before -to. The same report is GET /admin/usage on a running gateway.

A bolt file is locked by the one process that opens it: with state.backend
bolt, stop the gateway first, or ask the running gateway (GET /admin/usage).

exit codes: 0 done, 1 failed (the state store, a bad period), 2 usage or an
unreadable configuration file.
`

// runUsage runs "osb-gateway usage" and returns the exit code.
func runUsage(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("usage", usageCmdHelp, stderr)
	path := fs.String("config", "gateway.yaml", "the configuration `file` naming the state store")
	from := fs.String("from", "", "start of the period (RFC 3339, included); default: 30 days before -to")
	to := fs.String("to", "", "end of the period (RFC 3339, excluded); default: now")
	format := fs.String("format", "csv", "csv or json")
	tenant := fs.String("tenant", "", "only this tenant")
	broker := fs.String("broker", "", "only this broker")
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}
	q := proxy.UsageQuery{Tenant: *tenant, Broker: *broker}
	for _, f := range []struct {
		name, v string
		t       *time.Time
	}{{"from", *from, &q.From}, {"to", *to, &q.To}} {
		if f.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, f.v)
		if err != nil {
			fmt.Fprintf(stderr, "osb-gateway usage: -%s must be a time in RFC 3339 (like 2024-05-01T00:00:00Z), got %q\n", f.name, f.v)
			return exitUsage
		}
		*f.t = t
	}
	if *format != "csv" && *format != "json" {
		fmt.Fprintf(stderr, "osb-gateway usage: -format must be csv or json, got %q\n", *format)
		return exitUsage
	}
	cfg, code, ok := loadForInventory(*path, "usage", stderr)
	if !ok {
		return code
	}
	ctx := context.Background()
	st, err := openStateFor(ctx, cfg, "read its usage report through the admin API (GET /admin/usage)")
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway usage: %v\n", err)
		return exitFailed
	}
	defer st.Close()
	rep, err := proxy.ReportUsage(ctx, st, q, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway usage: %v\n", err)
		return exitFailed
	}
	if err := writeUsage(stdout, rep, *format); err != nil {
		fmt.Fprintf(stderr, "osb-gateway usage: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// writeUsage writes rep as CSV (a header, then a line per row;
// instance_hours rounded to a hundredth of an hour; the name columns
// empty, as the command reads no catalog) or as the JSON of GET
// /admin/usage (exact hours).
func writeUsage(w io.Writer, rep proxy.UsageReport, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteCSV(w, nil)
}
