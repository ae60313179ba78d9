package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/tokenlimit"
)

// bearer sends GET /admin/brokers with the bearer token from c and returns
// the answer and its body.
func bearer(t *testing.T, c *http.Client, url, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/admin/brokers", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// logLines counts the log's "admin call" lines by status.
func logLines(t *testing.T, logs *osbtest.Buffer) (byStatus map[int]int, notLogged []int) {
	t.Helper()
	byStatus = map[int]int{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Msg       string `json:"msg"`
			Status    int    `json:"status"`
			NotLogged *int   `json:"refusals_not_logged"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l.Msg == "admin call" {
			byStatus[l.Status]++
		}
		if l.NotLogged != nil {
			notLogged = append(notLogged, *l.NotLogged)
		}
	}
	return byStatus, notLogged
}

// Finding 7: 500 wrong admin tokens in 0.2 s were each compared and each
// logged at warn. Now a client address has tokenlimit.Burst refusals in a
// row, then one every Window/Burst; past them it gets 429 with
// Retry-After and its token is not compared, the right one neither. A
// success from one address forgives no other's refusals, concurrent
// guesses get no more than the limit, and the 429s log once a minute.
func TestAdminTokenGuessesAreLimited(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	_, url, logs := adminEnvAt(t, testAdminToken, nil, clk.Now)
	guesser, operator := osbtest.ClientFrom(t, "127.0.0.1"), osbtest.ClientFrom(t, "127.0.0.2")
	expect := func(c *http.Client, token string, want int, what string) *http.Response {
		t.Helper()
		res, body := bearer(t, c, url, token)
		if res.StatusCode != want {
			t.Fatalf("%s: %d %s, want %d", what, res.StatusCode, body, want)
		}
		return res
	}
	for i := range tokenlimit.Burst {
		expect(guesser, fmt.Sprintf("wrong-token-%03d-of-some-length", i), http.StatusUnauthorized, "a wrong token within the limit")
	}
	res, body := bearer(t, guesser, url, "wrong-token-past-the-limit")
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "6" ||
		!strings.Contains(body, "too many refused admin tokens from 127.0.0.1") || !strings.Contains(body, "the token was not checked") {
		t.Fatalf("a wrong token past the limit: %d Retry-After %q %s, want 429 with Retry-After: 6 saying why", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	expect(guesser, testAdminToken, http.StatusTooManyRequests, "the right token from the limited address (must not be compared)")

	// Another address is not limited, and its success forgives nothing.
	expect(operator, testAdminToken, http.StatusOK, "the right token from another address")
	expect(guesser, "wrong-token-after-the-other-success", http.StatusTooManyRequests, "the limited address after another's success")
	for i := range tokenlimit.Burst {
		expect(operator, fmt.Sprintf("operator-typo-%03d-of-some-length", i), http.StatusUnauthorized, "another address's own refusals")
	}
	expect(operator, "operator-typo-past-its-limit", http.StatusTooManyRequests, "another address past its own limit")

	// A flood from the limited address: every answer 429, one log line.
	for i := range 300 {
		if res, _ := bearer(t, guesser, url, fmt.Sprintf("flood-%03d-wrong-token", i)); res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("flood guess %d: %d, want 429", i, res.StatusCode)
		}
	}
	byStatus, notLogged := logLines(t, logs)
	if byStatus[http.StatusUnauthorized] != 2*tokenlimit.Burst || byStatus[http.StatusTooManyRequests] != 2 || len(notLogged) != 2 || notLogged[0] != 0 {
		t.Fatalf("log lines by status %v, refusals_not_logged %v: want %d 401s and one 429 per address, the first saying 0 were not logged",
			byStatus, notLogged, 2*tokenlimit.Burst)
	}

	// One attempt comes back every Window/Burst: the right token passes
	// (and costs nothing), the next wrong one takes it.
	clk.Advance(tokenlimit.Window / tokenlimit.Burst)
	expect(guesser, testAdminToken, http.StatusOK, "the right token once an attempt came back")
	expect(guesser, "wrong-token-once-it-came-back", http.StatusUnauthorized, "a wrong token once an attempt came back")
	expect(guesser, "wrong-token-right-after", http.StatusTooManyRequests, "a wrong token once that attempt is spent")

	// A minute on, the next refusal over the limit is logged again, with
	// how many were not.
	clk.Advance(tokenlimit.Window)
	for i := range tokenlimit.Burst {
		expect(guesser, fmt.Sprintf("next-minute-%03d-wrong", i), http.StatusUnauthorized, "a wrong token a minute later")
	}
	expect(guesser, "next-minute-past-the-limit", http.StatusTooManyRequests, "past the limit a minute later")
	// Not logged: the right token, the one after the other's success, the
	// flood's 300 and the one right after the attempt came back.
	if _, notLogged := logLines(t, logs); len(notLogged) != 3 || notLogged[2] != 303 {
		t.Fatalf("refusals_not_logged %v: want a third line counting the 303 not logged", notLogged)
	}

	// Concurrent guesses from a fresh address get no more than the limit.
	burst := osbtest.ClientFrom(t, "127.0.0.3")
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, url+"/admin/brokers", nil)
			req.Header.Set("Authorization", fmt.Sprintf("Bearer concurrent-%03d-wrong-token", i))
			res, err := burst.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			mu.Lock()
			statuses[res.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[http.StatusUnauthorized] != tokenlimit.Burst || statuses[http.StatusTooManyRequests] != 64-tokenlimit.Burst {
		t.Errorf("64 concurrent wrong tokens: %v, want %d compared (401) and the rest 429", statuses, tokenlimit.Burst)
	}
	if strings.Contains(logs.String(), testAdminToken) {
		t.Error("the token is in the log")
	}
}
