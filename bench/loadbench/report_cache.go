// This file is the report's catalog cache section: per cache kind and
// connection count, the gateway answering from its cache against the
// brokers behind it, and the verdicts the issue "Catalog cache and tenant
// views" sets.

package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Catalog cache targets the verdicts hold the gateway to.
const (
	// minCachedShare is the least share of the throughput of a broker
	// serving precomputed catalog bytes that the cached catalog keeps.
	minCachedShare = 0.85
	// minComposedFactor is the least multiple of the composing broker's
	// throughput that the cached catalog reaches.
	minComposedFactor = 3
	// maxCachedAllocShare is the most heap the gateway may allocate per
	// cached answer, over what direct costs, as a share of the catalog's
	// size: encoding the catalog again would allocate at least its size.
	maxCachedAllocShare = 0.01
)

// cacheRow compares, for one cache kind and connection count, the gateway
// answering from its catalog cache with the brokers behind it. Bytes per
// request are the whole process's heap allocations (load generator and
// broker included).
type cacheRow struct {
	Request     string  `json:"request"`
	Conns       int     `json:"conns"`
	CachedRPS   float64 `json:"gateway_cached_req_per_s"`
	DirectRPS   float64 `json:"direct_req_per_s"`
	RatioDirect float64 `json:"ratio_to_direct"`
	// The composing broker's figures, for catalog-cache; its ceiling is
	// conns/composeTime.
	ComposedRPS     *float64 `json:"direct_5ms_req_per_s,omitempty"`
	ComposedCeiling *float64 `json:"direct_5ms_ceiling_req_per_s,omitempty"`
	RatioComposed   *float64 `json:"ratio_to_direct_5ms,omitempty"`
	// Requests the gateway answered, and catalog requests that reached the
	// broker behind it, in the gateway's measured periods.
	Requests       int64   `json:"gateway_cached_requests"`
	BrokerRequests int64   `json:"broker_catalog_requests"`
	CachedBytes    float64 `json:"gateway_cached_bytes_per_req"`
	DirectBytes    float64 `json:"direct_bytes_per_req"`
}

// cacheVerdict is one catalog cache target, met or not. Conns is zero for
// a verdict on every connection count or none.
type cacheVerdict struct {
	Request string `json:"request"`
	Conns   int    `json:"conns,omitempty"`
	Claim   string `json:"claim"`
	Pass    bool   `json:"pass"`
	Detail  string `json:"detail"`
}

// buildCache derives the cache section from the rows of the cache kinds
// and what check found of their catalogs.
func buildCache(infos []catalogInfo, kinds []string, conns []int, rows []row) ([]cacheRow, []cacheVerdict) {
	var out []cacheRow
	var verdicts []cacheVerdict
	vc := verdictConnsOf(conns)
	for _, kind := range kinds {
		i := slices.IndexFunc(infos, func(c catalogInfo) bool { return c.Request == kind })
		if i < 0 {
			continue // not a cache kind
		}
		info := infos[i]
		var served, reached int64
		for _, n := range conns {
			c, ok := newCacheRow(kind, n, rows)
			if !ok {
				continue
			}
			out = append(out, c)
			served += c.Requests
			reached += c.BrokerRequests
			if n == vc {
				verdicts = append(verdicts, throughputVerdicts(c)...)
				if kind == kindCatalogLarge {
					verdicts = append(verdicts, allocVerdict(c, info))
				}
			}
		}
		verdicts = append(verdicts, identityVerdict(info), cacheVerdict{Request: kind, Pass: reached == 0,
			Claim:  "a cache hit makes no upstream request",
			Detail: fmt.Sprintf("%d catalog requests reached the broker while the gateway answered %d", reached, served)})
	}
	return out, verdicts
}

// newCacheRow gathers one cell's figures; it reports false when the cell
// lacks the direct or the cached row.
func newCacheRow(kind string, n int, rows []row) (cacheRow, bool) {
	c := cacheRow{Request: kind, Conns: n}
	var d, g, comp *row // direct, cached, composed
	for i, r := range rows {
		if r.Request != kind || r.Conns != n {
			continue
		}
		switch r.Target {
		case targetDirect:
			c.DirectRPS, c.DirectBytes, d = r.RPS, r.Bytes, &rows[i]
		case targetCached:
			c.CachedRPS, c.CachedBytes, c.Requests, g = r.RPS, r.Bytes, r.Requests, &rows[i]
			if r.BrokerCatalogRequests != nil {
				c.BrokerRequests = *r.BrokerCatalogRequests
			}
		case targetComposed:
			rps, ceiling := r.RPS, float64(n)*float64(time.Second)/float64(composeTime)
			c.ComposedRPS, c.ComposedCeiling, comp = &rps, &ceiling, &rows[i]
		}
	}
	if d == nil || g == nil {
		return c, false
	}
	c.RatioDirect = pairedRatio(g, d)
	if comp != nil {
		x := pairedRatio(g, comp)
		c.RatioComposed = &x
	}
	return c, true
}

// throughputVerdicts holds the cached catalog to minCachedShare of direct's
// throughput, and, for catalog-cache, to minComposedFactor times the
// composing broker's. catalog-1mb's throughput has no target: its ratio is
// in the table.
func throughputVerdicts(c cacheRow) []cacheVerdict {
	if c.Request != kindCatalogCache {
		return nil
	}
	v := []cacheVerdict{{Request: c.Request, Conns: c.Conns, Pass: c.RatioDirect >= minCachedShare,
		Claim: fmt.Sprintf("at %d connections a cached catalog through the gateway keeps ≥ %.2f× the throughput of a broker serving precomputed bytes",
			c.Conns, minCachedShare),
		Detail: fmt.Sprintf("gateway cached %.0f req/s, direct %.0f req/s, %.2f×", c.CachedRPS, c.DirectRPS, c.RatioDirect)}}
	if c.RatioComposed != nil {
		v = append(v, cacheVerdict{Request: c.Request, Conns: c.Conns, Pass: *c.RatioComposed >= minComposedFactor,
			Claim: fmt.Sprintf("at %d connections a cached catalog through the gateway reaches ≥ %d× the throughput of a broker that needs %s to compose it",
				c.Conns, minComposedFactor, composeTime),
			Detail: fmt.Sprintf("gateway cached %.0f req/s, %s %.0f req/s (its ceiling: %.0f), %.2f×; direct, with no proxy at all: %.2f×",
				c.CachedRPS, targetComposed, *c.ComposedRPS, *c.ComposedCeiling, *c.RatioComposed, ratio(c.DirectRPS, *c.ComposedRPS))})
	}
	return v
}

// allocVerdict holds the gateway to maxCachedAllocShare of the catalog's
// size in heap allocated per cached answer over direct's.
func allocVerdict(c cacheRow, info catalogInfo) cacheVerdict {
	added := c.CachedBytes - c.DirectBytes
	share := ratio(added, float64(info.Bytes))
	return cacheVerdict{Request: c.Request, Conns: c.Conns, Pass: c.Requests > 0 && share < maxCachedAllocShare,
		Claim: fmt.Sprintf("at %d connections the %s catalog is served from the cache without being re-encoded (the gateway allocates < %.0f%% of its size per request)",
			c.Conns, fmtBytes(float64(info.Bytes)), maxCachedAllocShare*100),
		Detail: fmt.Sprintf("gateway cached %s/req, direct %s/req: %+.0f B/req, %.2f%% of the catalog; encoding it would allocate ≥ %s/req",
			fmtBytes(c.CachedBytes), fmtBytes(c.DirectBytes), added, share*100, fmtBytes(float64(info.Bytes)))}
}

// identityVerdict says whether every target answered with the broker's
// catalog bytes.
func identityVerdict(info catalogInfo) cacheVerdict {
	v := cacheVerdict{Request: info.Request, Pass: info.Identical,
		Claim:  "the catalog arrives through the gateway byte-identical to the broker's",
		Detail: fmt.Sprintf("%d bytes, sha256 %.16s…", info.Bytes, info.SHA256)}
	if !info.Identical {
		v.Detail += fmt.Sprintf("; different: %v", info.Different)
	}
	return v
}

// writeCacheMarkdown prints the cache section, if there is one.
func (rep *report) writeCacheMarkdown(w io.Writer) {
	if len(rep.Cache) == 0 && len(rep.CacheVerdicts) == 0 {
		return
	}
	fmt.Fprintf(w, "\nCatalog cache: the gateway answers GET /v2/catalog from its cache (TTL 1h here).")
	for _, c := range rep.Meta.Catalogs {
		switch c.Request {
		case kindCatalogCache:
			fmt.Fprintf(w, " %s: direct is the sample broker, which serves its catalog (%d bytes) from precomputed bytes; "+
				"%s is a second sample broker that takes %s per request, as a broker composing its catalog would "+
				"(at most connections/%s req/s); %s is the gateway in front of the %s broker.",
				c.Request, c.Bytes, targetComposed, composeTime, composeTime, targetCached, composeTime)
		case kindCatalogLarge:
			fmt.Fprintf(w, " %s: a %d-byte catalog (%d services, %d plans) served from precomputed bytes, directly and through the gateway.",
				c.Request, c.Bytes, c.Services, c.Plans)
		}
	}
	fmt.Fprintf(w, " Broker requests: catalog requests that reached the broker while the gateway was measured. "+
		"Bytes/req: heap allocated per request by the whole process (load generator and broker included).\n\n")
	fmt.Fprintf(w, "| request | conns | gateway cached req/s | × direct | × %s | broker requests | gateway cached bytes/req | direct bytes/req |\n", targetComposed)
	fmt.Fprintf(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range rep.Cache {
		fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %s | %d | %s | %s |\n", c.Request, c.Conns, c.CachedRPS, c.RatioDirect,
			fmtOptRatio(c.RatioComposed), c.BrokerRequests, fmtBytes(c.CachedBytes), fmtBytes(c.DirectBytes))
	}
	fmt.Fprintln(w)
	for _, v := range rep.CacheVerdicts {
		fmt.Fprintf(w, "Verdict (%s): %s: %s (%s)\n", v.Request, v.Claim, passFail(v.Pass), v.Detail)
	}
}

// fmtBytes formats a byte count in B, KiB or MiB.
func fmtBytes(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.2f MiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}
