package main

// The views the checker compares, read after everything drained: the
// gateways' (inventory, locks, orphan queue, and the locks seen while the
// campaign ran) and each broker's (holdings and call log).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// callLine is one line of a broker's call log.
type callLine = samplebroker.CallRecord

func readCallLog(path string) ([]callLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []callLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l callLine
		if json.Unmarshal(sc.Bytes(), &l) == nil { // a torn last line (a crash) is skipped
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// gatewayView is what the gateways hold.
type gatewayView struct {
	// inventory is every record, by "broker instance" and "broker
	// instance/binding": true when it stands for what the broker holds,
	// false for a create still in progress or failed (recordedOp.exists).
	inventory map[string]bool
	orphans   map[string]bool // the same keys
	locks     []string
}

// recordedOp is an inventory record's last operation (store.LastOperation).
type recordedOp struct {
	Kind  string `json:"kind"`
	State string `json:"state"`
}

// exists is proxy's exists (emulate.go): a record stands for a resource
// the broker holds unless its last operation is its create (provision or
// bind) still in progress or failed.
func (o recordedOp) exists(create string) bool { return o.Kind != create || o.State == "succeeded" }

type adminOrphan struct {
	Broker      string    `json:"broker"`
	Kind        string    `json:"kind"`
	InstanceID  string    `json:"instance_id"`
	BindingID   string    `json:"binding_id"`
	NextAttempt time.Time `json:"next_attempt"`
	LastError   string    `json:"last_error"`
}

type adminLock struct {
	Key        string    `json:"key"`
	Owner      string    `json:"owner"`
	Kind       string    `json:"kind"`
	Broker     string    `json:"broker"`
	InstanceID string    `json:"instance_id"`
	BindingID  string    `json:"binding_id"`
	Async      bool      `json:"async"`
	Started    time.Time `json:"started"`
	Shim       *struct {
		State string `json:"state"`
	} `json:"shim"`
}

// seenLock is a lock the audit saw during the run: when it began, and the
// last time it was still there.
type seenLock struct {
	adminLock
	First time.Time `json:"first_seen"`
	Last  time.Time `json:"last_seen"`
}

// lockAudit lists the gateways' locks every interval while the campaign
// runs, so that a lock that outlives its operation is seen even when a
// deadline ends it before the check.
type lockAudit struct {
	mu    sync.Mutex
	locks map[string]*seenLock // key + owner
}

func (a *lockAudit) run(c *cluster, every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ls, err := c.locks()
		if err != nil {
			continue // a replica down: the next tick sees it
		}
		now := time.Now()
		a.mu.Lock()
		for _, l := range ls {
			k := l.Key + " " + l.Owner
			if a.locks[k] == nil {
				a.locks[k] = &seenLock{adminLock: l, First: now}
			}
			a.locks[k].Last = now
		}
		a.mu.Unlock()
	}
}

func (a *lockAudit) seen() []*seenLock {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*seenLock, 0, len(a.locks))
	for _, l := range a.locks {
		out = append(out, l)
	}
	slices.SortFunc(out, func(x, y *seenLock) int { return x.Started.Compare(y.Started) })
	return out
}

func (c *cluster) orphans() ([]adminOrphan, error) {
	var all []adminOrphan
	for _, g := range c.viewReplicas() {
		var v struct {
			Orphans []adminOrphan `json:"orphans"`
		}
		if err := g.adminGet("/admin/orphans", &v); err != nil {
			return nil, err
		}
		all = append(all, v.Orphans...)
	}
	return all, nil
}

func (c *cluster) locks() ([]adminLock, error) {
	var all []adminLock
	for _, g := range c.viewReplicas() {
		var v struct {
			Operations []adminLock `json:"operations"`
		}
		if err := g.adminGet("/admin/operations", &v); err != nil {
			return nil, err
		}
		all = append(all, v.Operations...)
	}
	return all, nil
}

// viewReplicas are the replicas whose state is to be read: one when they
// share Redis or PostgreSQL, each when each has its own file.
func (c *cluster) viewReplicas() []*gatewayProc {
	if c.store == "redis" || c.store == "postgres" {
		return c.gateways[:1]
	}
	return c.gateways
}

func (c *cluster) view() (*gatewayView, error) {
	v := &gatewayView{inventory: map[string]bool{}, orphans: map[string]bool{}}
	for _, g := range c.viewReplicas() {
		for _, b := range c.brokers {
			for cursor := ""; ; {
				var page struct {
					Instances []struct {
						InstanceID    string     `json:"instance_id"`
						LastOperation recordedOp `json:"last_operation"`
					} `json:"instances"`
					NextCursor string `json:"next_cursor"`
				}
				q := url.Values{"broker": {b.name}, "limit": {"500"}}
				if cursor != "" {
					q.Set("cursor", cursor)
				}
				if err := g.adminGet("/admin/instances?"+q.Encode(), &page); err != nil {
					return nil, err
				}
				for _, in := range page.Instances {
					v.inventory[b.name+" "+in.InstanceID] = in.LastOperation.exists("provision")
					var one struct {
						Bindings []struct {
							BindingID     string     `json:"binding_id"`
							LastOperation recordedOp `json:"last_operation"`
						} `json:"bindings"`
					}
					if err := g.adminGet("/admin/instances/"+b.name+"/"+url.PathEscape(in.InstanceID), &one); err != nil {
						return nil, err
					}
					for _, bd := range one.Bindings {
						v.inventory[b.name+" "+in.InstanceID+"/"+bd.BindingID] = bd.LastOperation.exists("bind")
					}
				}
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
		}
	}
	list, err := c.orphans()
	if err != nil {
		return nil, err
	}
	for _, o := range list {
		k := o.Broker + " " + o.InstanceID
		if o.BindingID != "" {
			k += "/" + o.BindingID
		}
		v.orphans[k] = true
	}
	ls, err := c.locks()
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		v.locks = append(v.locks, fmt.Sprintf("%s %s async=%v since %s", l.Key, l.Kind, l.Async, l.Started.Format("15:04:05.000")))
	}
	return v, nil
}

// brokerView is what one broker holds and logged.
type brokerView struct {
	instances, bindings map[string]bool
	calls               []callLine
}
