package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNewestPagesNewestFirst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	write := func(name string, from, to int) {
		var b []byte
		for i := from; i < to; i++ {
			b = fmt.Appendf(b, `{"time":%q,"request_id":"r%d","tenant":"t%d","endpoint":"provision","method":"PUT","status":201,"duration_ms":1,"outcome":"forwarded","blocked":false,"prev_hash":""}`+"\n",
				t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i, i%2)
		}
		b = append(b, "not a record\n"...)
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(rotatedName(path, 1), 0, 5)
	write(path, 5, 10)
	files, err := Files(path)
	if err != nil || len(files) != 2 || files[1] != path {
		t.Fatalf("Files: %v, %v", files, err)
	}
	for _, c := range []struct {
		name        string
		f           Filter
		skip, limit int
		want        []string
		matched     int
	}{
		{"first page", Filter{}, 0, 3, []string{"r9", "r8", "r7"}, 10},
		{"across files", Filter{}, 3, 4, []string{"r6", "r5", "r4", "r3"}, 10},
		{"last page", Filter{}, 8, 4, []string{"r1", "r0"}, 10},
		{"past the end", Filter{}, 12, 4, nil, 10},
		{"filtered", Filter{Tenant: "t1"}, 1, 2, []string{"r7", "r5"}, 5},
	} {
		recs, matched, err := Newest(c.f, c.skip, c.limit, files...)
		var got []string
		for _, r := range recs {
			got = append(got, r.RequestID)
		}
		if err != nil || matched != c.matched || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, %d matched, %v; want %v, %d", c.name, got, matched, err, c.want, c.matched)
		}
	}
}
