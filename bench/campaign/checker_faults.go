package main

// When a fault excuses what it caused: as it really happened.

import (
	"slices"
	"strings"
	"time"
)

// faulted reports whether a fault of one of kinds on target (any target
// when empty) was in effect between from and to, as it really happened
// (window).
func (v *verdict) faulted(target string, from, to time.Time, kinds ...string) bool {
	for _, f := range v.faults {
		if (target == "" || f.Target == target) && slices.Contains(kinds, f.Kind) {
			if start, end, ok := window(f); ok && !start.After(to) && !end.Before(from) {
				return true
			}
		}
	}
	return false
}

// injected are the faults the broker carries out itself, on one endpoint.
var injected = []string{fBrokerError, fBrokerSlow, fBrokerHang, fBrokerFailOp, fBrokerJunk}

// window is when f was in effect: from its start to its end, or for a
// fault the broker carries out, from its first firing to what the last
// firing did (its latency, or a hang, at most the gateway's timeout);
// none for a fault that failed (a kill that killed nothing) or never
// fired (cleared unused, or lost in a crash).
func window(f *fault) (from, to time.Time, ok bool) {
	if f.Err != "" {
		return time.Time{}, time.Time{}, false
	}
	if !slices.Contains(injected, f.Kind) {
		return f.Start, f.End, true
	}
	if len(f.Fired) == 0 {
		return time.Time{}, time.Time{}, false
	}
	return f.Fired[0].Add(-200 * time.Millisecond), f.Fired[len(f.Fired)-1].Add(f.Latency + brokerTimeout + time.Second), true
}

// brokerFaulted reports whether a fault on o's broker explains a 5xx that
// blames it (desc, lowered) between from and to: a crash or a fault of its
// link in effect then, or an injected fault on o's endpoint (the catalog's,
// for a 5xx about the catalog) that fired then.
func (v *verdict) brokerFaulted(o *op, d string, from, to time.Time) bool {
	for _, f := range v.faults {
		if f.Target != o.Broker || !slices.Contains(brokerSide, f.Kind) {
			continue
		}
		if !slices.Contains(injected, f.Kind) {
			if start, end, ok := window(f); ok && !start.After(to) && !end.Before(from) {
				return true
			}
			continue
		}
		if f.Endpoint != o.Kind && (f.Endpoint != "catalog" || !strings.Contains(d, "catalog")) {
			continue
		}
		for _, t := range f.Fired {
			if !t.Before(from) && !t.After(to) {
				return true
			}
		}
	}
	return false
}

var brokerSide = []string{fBrokerCrash, fBrokerError, fBrokerSlow, fBrokerHang, fBrokerFailOp, fBrokerJunk, fLinkDelay, fLinkStall, fLinkCut}
var storeSide = []string{fRedisPause, fPgPause, fPgRestart, fLinkDelay, fLinkStall, fLinkCut, fStoreFailover}
