package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

func BenchmarkInventoryFootprintRedis(b *testing.B) {
	n := *storetest.InventoryN
	srv := storetest.StartRedis(b)
	s := openRedisAt(b, srv.StoreConfig(), time.Now)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	used := func() float64 {
		info, err := raw.Info(context.Background(), "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		b.Fatal("INFO memory has no used_memory")
		return 0
	}
	before := used()
	storetest.ImportInventory(b, s, n)
	storetest.ReportFootprint(b, used()-before, n)
}
