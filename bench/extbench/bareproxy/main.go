// Command bareproxy is extbench's floor for any Go proxy: a separate process
// serving a bare, tuned httputil.ReverseProxy (the gateway's buffer pool, a
// transport whose idle pool holds every connection, GOGC 400 unless the GOGC
// environment variable is set) that sets the broker's URL and credentials.
// It prints the address it listens on as its first line of standard output.
package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"runtime/debug"

	"github.com/osb-gateway/osb-gateway/bench/extbench/internal/benchserve"
	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
)

// gogc is the bare proxy's GC target: a tuned Go proxy trades memory for
// fewer collections.
const gogc = 400

// maxConns sizes the idle pool: more than the benchmark's connections.
const maxConns = 256

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "the `address` to listen on")
	upstream := flag.String("upstream", "", "the broker's base `URL`")
	user := flag.String("username", "", "the broker's username")
	pass := flag.String("password", "", "the broker's password")
	flag.Parse()
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gogc)
	}
	u, err := url.Parse(*upstream)
	if err != nil || u.Host == "" {
		log.Fatalf("-upstream %q: want an http URL", *upstream)
	}
	rp, _ := reference.BareProxy(u, "Basic "+base64.StdEncoding.EncodeToString([]byte(*user+":"+*pass)), maxConns)
	if err := benchserve.Serve(*listen, rp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
