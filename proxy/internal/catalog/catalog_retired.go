package catalog

import (
	"context"
	"log/slog"

	"github.com/osb-gateway/osb-gateway/rules"
)

// KeptEntry is the catalog the state store keeps for f's broker (the
// latest fetched, which catalog drift records), as a stale entry, for a
// retired broker that cannot be fetched and has nothing in the cache: a
// restarted gateway serves the retired broker's catalog as the one before
// did, so platforms keep their plans while they delete what they hold.
// It is cached (already expired, so each fetch that follows is a retry
// under the backoff); nil when the store keeps no catalog or fails.
func (c *Cache) KeptEntry(ctx context.Context, f Fetch) *Entry {
	t := c.drift.Load()
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), driftTimeout)
	defer cancel()
	rec, err := t.St.GetCatalogs(ctx, f.Up.Name)
	if err != nil {
		return nil
	}
	kept := rec.Latest
	if len(kept.Body) == 0 && kept.Hash == rec.Accepted.Hash {
		kept.Body = rec.Accepted.Body // the same bytes, kept once
	}
	if len(kept.Body) == 0 {
		return nil
	}
	ix, _, err := rules.NewIndex(kept.Body)
	if err != nil {
		t.Log.LogAttrs(ctx, slog.LevelWarn, "the kept catalog of a retired broker does not decode", slog.String("broker", f.Up.Name),
			slog.String("error", err.Error()))
		return nil
	}
	e := keptCatalogEntry(f.Key, kept, ix, []string{"application/json"}, kept.At, kept.At)
	c.Entries.Add(f.Key, e)
	return e
}
