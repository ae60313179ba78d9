package redis

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// TestRedisOldOrphanRecord serves an orphan record written before claims
// existed: the Lua scripts of DueOrphans and ClaimOrphan read it too.
func TestRedisOldOrphanRecord(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	s := openRedisAt(t, srv.StoreConfig(), osbtest.NewClock(storetest.T0).Now)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	storetest.CheckOldOrphanRecord(t, s, func(rec []byte) {
		_, err := raw.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, s.orphansKey(), "old1", rec)
			p.ZAdd(ctx, s.orphanDueKey(), redis.Z{Score: float64(storetest.T0.UnixMicro()), Member: "old1"})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// commands counts what a go-redis client sends, by command name.
type commands struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *commands) count(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		c.n[cmd.Name()]++
	}
}

func (c *commands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.count(cmds...)
		return next(ctx, cmds)
	}
}

// TestRedisListInstanceMatches checks that List by instance GETs only the
// instance's keys: the SCAN MATCHes its prefix on the server, and keys of
// instance ids extending it are dropped before GET.
func TestRedisListInstanceMatches(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	s := openRedisAt(t, srv.StoreConfig(), osbtest.NewClock(storetest.T0).Now)
	var want []store.Lock
	for _, binding := range []string{"", "x1", "x2"} {
		want = append(want, storetest.MustAcquire(t, s, storetest.InstanceLock("b1", "i1", binding, "x", time.Hour)))
	}
	for i := range 40 {
		storetest.MustAcquire(t, s, storetest.InstanceLock("b1", fmt.Sprint("j", i), "", "x", time.Hour))
	}
	storetest.MustAcquire(t, s, storetest.InstanceLock("b1", "i10", "", "x", time.Hour))
	storetest.MustAcquire(t, s, storetest.InstanceLock("b1", "i1-a", "x1", "x", time.Hour))

	c := &commands{n: map[string]int{}}
	s.client.AddHook(c)
	got, err := s.List(ctx, store.ListFilter{Broker: "b1", InstanceID: "i1"})
	if d := cmp.Diff(want, got); err != nil || d != "" {
		t.Errorf("List by instance = %v; diff (-want +got):\n%s", err, d)
	}
	if c.n["get"] != len(want) {
		t.Errorf("List by instance sent %d GETs, want %d", c.n["get"], len(want))
	}
}
