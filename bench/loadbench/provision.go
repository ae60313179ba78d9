// This file builds the targets of the provision request kind, run only when
// -requests names it: synchronous provisions of the sample broker's sync
// plan, every request a new instance (so the gateway's operation lock is
// never held by another call and nothing is blocked), each answered 201.
// Through the gateway every provision acquires the instance's operation lock
// in the state store before the broker call and releases it after:
//
//   - direct: the sample broker itself;
//   - gateway memory: a gateway with the in-memory store;
//   - gateway bolt: a gateway with the bolt store, in a file in a
//     temporary directory that is closed and removed at the end.
//
// Every gateway is observed as osb-gateway serve runs by default.

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
)

// kindProvision is the provision request kind, as named by -requests.
const kindProvision = "provision"

// The provision kind's target names (besides direct).
const (
	targetGatewayMemory = "gateway memory"
	targetGatewayBolt   = "gateway bolt"
)

// provisionBody is every provision's body: the sample broker's sync plan.
var provisionBody = fmt.Appendf(nil, `{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s"}`,
	samplebroker.ServiceID, samplebroker.PlanSyncID)

// startProvision starts the gateways of the provision kind, each with its
// own store, in front of the sample broker; the direct target is e.broker.
func (e *env) startProvision() error {
	dir, err := os.MkdirTemp("", "loadbench-state-")
	if err != nil {
		return err
	}
	e.closers = append(e.closers, func() { _ = os.RemoveAll(dir) })
	e.stateDir = dir
	targets := []*target{e.broker}
	for _, c := range []struct {
		name string
		cfg  store.Config
	}{
		{targetGatewayMemory, store.Config{Backend: store.BackendMemory}},
		{targetGatewayBolt, store.Config{Backend: store.BackendBolt, Path: filepath.Join(dir, "state.db")}},
	} {
		st, err := backend.Open(c.cfg, time.Now)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		e.closers = append(e.closers, func() { _ = st.Close() })
		gw, err := buildGateway(e.urls, observe{store: st})
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		base, stop, err := serve("gateway", gw.handler)
		if err != nil {
			gw.close()
			return fmt.Errorf("%s: %w", c.name, err)
		}
		e.closers = append(e.closers, func() { stop(); gw.close() })
		targets = append(targets, &target{name: c.name, base: base + gatewayPath, header: platformHeader()})
	}
	e.provision = targets
	return nil
}

// provisionRuns numbers the request factories made, so that instance ids
// never repeat within the process (the sample broker outlives every run).
var provisionRuns atomic.Int64

// provisionRequests returns a spec.newRequest that makes PUT
// /v2/service_instances/<id> to t, the id new on every call: the factory's
// number, the worker's index and its request count.
func provisionRequests(t *target) func(context.Context, int, int64) (*http.Request, error) {
	prefix := t.url("/v2/service_instances/loadbench-p" + strconv.FormatInt(provisionRuns.Add(1), 10) + "-")
	return func(ctx context.Context, worker int, seq int64) (*http.Request, error) {
		u := prefix + strconv.Itoa(worker) + "-" + strconv.FormatInt(seq, 10)
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(provisionBody))
		if err != nil {
			return nil, err
		}
		req.Header = t.header.Clone()
		req.Header.Set("Content-Type", "application/json")
		return req, nil
	}
}

// checkProvision sends one provision to every target of the kind and
// requires 201.
func (e *env) checkProvision() error {
	for _, t := range e.provision {
		req, err := provisionRequests(t)(context.Background(), 0, 0)
		if err != nil {
			return err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("%s provision: %w", t.name, err)
		}
		var out map[string]any
		err = decodeJSON(res, http.StatusCreated, &out)
		res.Body.Close()
		if err != nil {
			return fmt.Errorf("%s provision: %w", t.name, err)
		}
	}
	return nil
}

// loadSpec returns the load run of kind against t at path (pass-through
// kinds) with the rest of s: for provision, a new instance per request and
// 201 expected.
func loadSpec(kind string, t *target, path string, s spec) spec {
	s.header, s.tls = t.header, t.tls
	if kind == kindProvision {
		s.newRequest, s.status = provisionRequests(t), http.StatusCreated
		return s
	}
	s.url = t.url(path)
	return s
}

// hasProvision reports whether kinds include the provision kind.
func hasProvision(kinds []string) bool { return slices.Contains(kinds, kindProvision) }
