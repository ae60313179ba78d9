// Command direct is extbench's broker: a separate process that answers
// last_operation with precomputed bytes (about 60 B) and the catalog with the
// sample broker's, so that any proxy in front of it is measured against the
// cheapest upstream a Go server can be. It prints the address it listens on
// as its first line of standard output.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/osb-gateway/osb-gateway/bench/extbench/internal/benchserve"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// LastOperation is the answer to every last_operation poll.
const LastOperation = `{"state":"in progress","description":"provisioning 42 of 100"}`

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "the `address` to listen on")
	flag.Parse()
	if err := benchserve.Serve(*listen, newHandler(samplebroker.New(samplebroker.Options{}).Catalog())); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// answer is a precomputed response.
type answer struct {
	body   []byte
	length []string
}

func newAnswer(body []byte) answer {
	return answer{body: body, length: []string{strconv.Itoa(len(body))}}
}

var contentTypeJSON = []string{"application/json"}

// newHandler answers GET .../last_operation with LastOperation, GET
// /v2/catalog with catalog and anything else with 404 and {}.
func newHandler(catalog []byte) http.Handler {
	lastOp, cat, none := newAnswer([]byte(LastOperation)), newAnswer(catalog), newAnswer([]byte("{}"))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, status := none, http.StatusNotFound
		switch {
		case strings.HasSuffix(r.URL.Path, "/last_operation"):
			a, status = lastOp, http.StatusOK
		case r.URL.Path == "/v2/catalog":
			a, status = cat, http.StatusOK
		}
		h := w.Header()
		h["Content-Type"] = contentTypeJSON
		h["Content-Length"] = a.length
		w.WriteHeader(status)
		_, _ = w.Write(a.body)
	})
}
