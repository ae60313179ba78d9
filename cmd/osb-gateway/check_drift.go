package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/postgres"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// reportDrift compares each broker's catalog, as check just fetched it,
// with the accepted catalog in the configuration's state store and writes
// one warning per drift item (and per note) to stderr, and a line per
// broker to stdout. Drift does not fail the check: it is for an operator
// to accept (POST /admin/catalogs/{broker}/accept) or undo at the broker.
// A store check cannot open (memory, or a bolt file the running gateway
// holds) is said on stdout and skipped; it returns the number of items.
func reportDrift(ctx context.Context, cfg *config.Config, g *proxy.Gateway, path string, stdout, stderr io.Writer) int {
	if cfg.State.Backend == store.BackendMemory {
		fmt.Fprintf(stdout, "%s: catalog drift not checked: state.backend is memory, no accepted catalog outlives the gateway (read GET /admin/catalogs/drift)\n", path)
		return 0
	}
	if cfg.State.Backend == store.BackendBolt {
		if _, err := os.Stat(cfg.State.Path); errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stdout, "%s: catalog drift not checked: no state file %s yet, so no accepted catalog\n", path, cfg.State.Path)
			return 0
		}
	}
	st, err := openInventory(ctx, cfg)
	switch {
	case errors.Is(err, store.ErrUnavailable) && cfg.State.Backend == store.BackendBolt:
		fmt.Fprintf(stdout, "%s: catalog drift not checked: the bolt file %s is held by another process, most likely the running gateway "+
			"(read GET /admin/catalogs/drift on its admin listener)\n", path, cfg.State.Path)
		return 0
	case err != nil:
		fmt.Fprintf(stdout, "%s: catalog drift not checked: %v\n", path, err)
		return 0
	}
	defer st.Close()
	if cfg.State.Backend == store.BackendPostgres {
		// Reading the store would create its schema: check changes nothing.
		if sc, err := postgres.Status(ctx, st); err != nil || !sc.Current() {
			fmt.Fprintf(stdout, "%s: catalog drift not checked: the PostgreSQL schema is not created yet, so no accepted catalog\n", path)
			return 0
		}
	}
	reports, err := g.CatalogDriftAgainst(ctx, st)
	if err != nil {
		fmt.Fprintf(stderr, "%s: warning: catalog drift not checked: the state store failed: %v\n", path, err)
		return 0
	}
	n := 0
	for _, d := range reports {
		for _, note := range d.Notes {
			fmt.Fprintf(stderr, "%s: warning: broker %q catalog drift: %s\n", path, d.Broker, note)
		}
		for _, it := range d.Items {
			fmt.Fprintf(stderr, "%s: warning: broker %q catalog drift: %s: %s (%s live)\n", path, d.Broker, it.Kind, it.Detail, plural(it.LiveInstances, "instance"))
		}
		n += len(d.Items)
		if d.AcceptedHash != "" && d.LatestHash != "" {
			fmt.Fprintf(stdout, "%s: broker %q: catalog drift from the accepted catalog (%s, by %s): %s\n", path, d.Broker,
				d.AcceptedAt.Format("2006-01-02T15:04:05Z07:00"), d.AcceptedBy, plural(len(d.Items), "item"))
		}
	}
	return n
}
